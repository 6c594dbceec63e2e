// The official Node.js driver against a mongotest replica set driven
// through the control endpoint: a step-down followed by a retryable write,
// a retry forced by a fail point, members stopped, restarted, partitioned
// and healed, and the endpoint's errors.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MongoClient } from 'mongodb';
import { TIMEOUT_MS, startMongotest, stopChecked } from './mongotest.mjs';

describe('a replica set of three', { timeout: 6 * TIMEOUT_MS }, () => {
  let m;
  let client;
  const events = []; // insert commands: started, succeeded and failed
  before(async () => {
    m = await startMongotest(['-replset', '3']);
    client = new MongoClient(m.uri, {
      serverSelectionTimeoutMS: 10_000,
      monitorCommands: true,
      retryWrites: true,
    });
    for (const kind of ['commandStarted', 'commandSucceeded', 'commandFailed']) {
      client.on(kind, (e) => {
        if (e.commandName === 'insert') events.push({ kind, e });
      });
    }
    await client.connect();
  });
  after(async () => {
    await client?.close();
    await stopChecked(m);
  });

  // primary asks the control endpoint which member is primary.
  async function primary() {
    const { status, json } = await m.control('/status', { method: 'GET' });
    assert.equal(status, 200);
    return json.primary;
  }

  // me asks the driver's primary who it is.
  async function me() {
    return (await client.db('admin').command({ hello: 1 })).me;
  }

  test('a step-down, then a retryable write to the new primary', async () => {
    const orders = client.db('shop').collection('orders');
    await orders.insertOne({ _id: 1 });
    assert.equal(await primary(), 0);
    assert.equal(await me(), m.info.hosts[0]);

    const { status, json } = await m.control('/stepdown');
    assert.equal(status, 200, JSON.stringify(json));
    assert.equal(json.oldPrimary, 0);
    assert.equal(json.primary, 1);
    assert.equal(await primary(), 1);

    // The write goes to the new primary: at once if the driver has heard
    // of the election, else after a NotWritablePrimary from the old one,
    // retried.
    const res = await orders.insertOne({ _id: 2 });
    assert.equal(res.insertedId, 2);
    assert.equal(await me(), m.info.hosts[1]);
    const stats = await m.control('/stats?member=1', { method: 'GET' });
    assert.ok(stats.json.stats.commands.insert >= 1, JSON.stringify(stats.json.stats.commands));
    assert.deepEqual(await orders.find({}, { sort: { _id: 1 } }).toArray(), [{ _id: 1 }, { _id: 2 }]);
  });

  test('a retryable write retried after a fail point', async () => {
    const orders = client.db('shop').collection('orders');
    const fp = await m.control('/failpoint', {
      body: {
        configureFailPoint: 'failCommand',
        mode: { times: 1 },
        data: { failCommands: ['insert'], errorCode: 189 }, // PrimarySteppedDown
      },
    });
    assert.equal(fp.status, 200, JSON.stringify(fp.json));
    assert.equal(fp.json.member, await primary());

    const from = events.length;
    await orders.insertOne({ _id: 3 });
    const seen = events.slice(from);
    assert.deepEqual(
      seen.map(({ kind }) => kind),
      ['commandStarted', 'commandFailed', 'commandStarted', 'commandSucceeded'],
    );
    // The retry is the same write: the same session and txnNumber.
    const [first, retry] = seen.filter(({ kind }) => kind === 'commandStarted').map(({ e }) => e.command);
    assert.ok(first.txnNumber !== undefined, 'the insert has no txnNumber: not a retryable write');
    assert.equal(String(retry.txnNumber), String(first.txnNumber));
    assert.deepEqual(retry.lsid, first.lsid);
    assert.equal(await orders.countDocuments({ _id: 3 }), 1);
  });

  test('stop, restart, partition and heal members', async () => {
    const member = async (i) => (await m.control('/status', { method: 'GET' })).json.members[i];

    let r = await m.control('/stop?member=2');
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal((await member(2)).state, 'STOPPED');
    // The set still takes writes, with one secondary down.
    await client.db('shop').collection('orders').insertOne({ _id: 4 });

    r = await m.control('/restart?member=2');
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal((await member(2)).state, 'SECONDARY');

    r = await m.control('/partition?member=0');
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal((await member(0)).partitioned, true);
    r = await m.control('/heal?member=0');
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal((await member(0)).partitioned, false);

    r = await m.control('/lag?member=2&ms=30000');
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal((await member(2)).lagMs, 30000);
  });

  test('the control endpoint refuses bad requests with 4xx and a JSON error', async () => {
    const cases = [
      ['/elect?member=9', 'POST', 400, /members are 0 to 2/],
      ['/elect?member=one', 'POST', 400, /a member's index is an integer/],
      ['/elect', 'POST', 400, /member.*missing/],
      [`/elect?member=${await primary()}`, 'POST', 409, /already primary/],
      ['/stepdown', 'GET', 405, /takes POST/],
      ['/lag?member=1&ms=-1', 'POST', 400, /lag/],
      ['/nothing', 'GET', 404, /no such path/],
    ];
    for (const [path, method, want, message] of cases) {
      const { status, json } = await m.control(path, { method });
      assert.equal(status, want, `${method} ${path}: ${JSON.stringify(json)}`);
      assert.equal(json.ok, false);
      assert.match(json.error, message);
    }
    const bad = await m.control('/failpoint', { body: '{"mode": {"times": 1}, "data": {"failCommands": ["insert"], "errorCod": 1}}' });
    assert.equal(bad.status, 400);
    assert.match(bad.json.error, /errorCod/);
  });
});
