// Retryable writes and reads through primary changes, under load: loops
// insert documents with unique _ids, and others read, for a few seconds,
// while the replica set's primary steps down twice: once with an election
// at once, once with none for most of a second (no primary at all) before
// one. The proxy holds the operations it cannot run and retries them, with
// their lsid and txnNumber, on the new primary: no operation fails, and
// every acknowledged insert is there exactly once. One more writer goes
// through the proxy's load balancer listener (loadBalanced=true).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { clientOptions, control, env, mongodb, recordCommands } from './proxytest.mjs';

const { MongoClient } = mongodb;

const WRITERS = 4;
const READERS = 2;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

describe('a replica set whose primary changes under load, through the proxy', () => {
  let client;
  let lbClient;
  let events;
  let lbEvents;
  let inserts;
  const acked = [];
  const insertErrors = [];
  let reads = 0;
  const readErrors = [];
  const changes = [];
  let poolsCleared = 0;

  before(async () => {
    const ctl = env('MONGOTEST_CONTROL');
    client = new MongoClient(env('PROXY_URI'), clientOptions);
    events = recordCommands(client);
    client.on('connectionPoolCleared', () => poolsCleared++);
    await client.connect();
    lbClient = new MongoClient(env('PROXY_LB_URI'), clientOptions);
    lbEvents = recordCommands(lbClient);
    lbClient.on('connectionPoolCleared', () => poolsCleared++);
    await lbClient.connect();
    inserts = client.db('failover').collection('inserts');
    const lbInserts = lbClient.db('failover').collection('inserts');
    await inserts.deleteMany({});
    await inserts.insertOne({ _id: 'seed', w: -1 });

    let stop = false;
    const writer = async (w, coll = inserts) => {
      for (let i = 0; !stop; i++) {
        const _id = `${w}-${i}`;
        try {
          await coll.insertOne({ _id, w, i });
          acked.push(_id);
        } catch (e) {
          insertErrors.push(`${_id}: ${e.message}`);
        }
      }
    };
    // A reader looks up acknowledged inserts by _id: each is found.
    const reader = async () => {
      while (!stop) {
        const _id = acked.length > 0 ? acked[Math.floor(Math.random() * acked.length)] : 'seed';
        try {
          const docs = await inserts.find({ _id }).toArray();
          if (docs.length !== 1) throw new Error(`the acknowledged insert ${_id} was not found`);
          reads++;
        } catch (e) {
          readErrors.push(e.message);
        }
      }
    };
    const loops = [
      ...Array.from({ length: WRITERS }, (_, w) => writer(w)),
      writer(WRITERS, lbInserts),
      ...Array.from({ length: READERS }, reader),
    ];
    try {
      await sleep(600);
      const primary = async () => (await control(ctl, '/status', { method: 'GET' })).json.primary;
      const first = await primary();
      changes.push({ what: 'stepdown', first, reply: await control(ctl, '/stepdown') });
      await sleep(800);
      // No election: the set has no primary until /elect.
      const second = await primary();
      changes.push({ what: 'stepdown?next=none', second, reply: await control(ctl, '/stepdown?next=none') });
      await sleep(700);
      changes.push({ what: 'elect', reply: await control(ctl, `/elect?member=${first}`) });
      await sleep(800);
    } finally {
      stop = true;
      await Promise.all(loops);
    }
  });
  after(async () => {
    await client?.close();
    await lbClient?.close();
  });

  test('the primary changed twice', () => {
    for (const c of changes) assert.equal(c.reply.status, 200, JSON.stringify(c));
    const [down, none, elect] = changes;
    assert.notEqual(down.reply.json.primary, down.first);
    assert.equal(none.reply.json.primary, null);
    assert.equal(elect.reply.json.primary, down.first);
  });

  test('no insert failed', () => {
    assert.ok(acked.length > 100, `only ${acked.length} inserts in the window`);
    assert.ok(acked.some((id) => id.startsWith(`${WRITERS}-`)), 'no insert through the load balancer listener');
    assert.deepEqual(insertErrors.slice(0, 5), []);
  });

  test('the driver saw no insert fail: the proxy held and retried them', (t) => {
    const failed = [...events, ...lbEvents].filter((e) => e.kind === 'failed' && e.name === 'insert');
    assert.deepEqual(
      failed.slice(0, 5).map((e) => `${e.failure?.code}: ${e.failure?.message}`),
      [],
    );
    assert.equal(poolsCleared, 0, 'the driver cleared its pool to the proxy');
    t.diagnostic(`${acked.length} inserts, ${reads} reads`);
  });

  test('every acknowledged insert is there exactly once', async () => {
    const docs = await inserts.find({ w: { $gte: 0 } }, { projection: { _id: 1 } }).toArray();
    const ids = docs.map((d) => d._id);
    assert.equal(new Set(ids).size, ids.length, 'an _id twice');
    assert.equal(ids.length, acked.length, 'documents other than the acknowledged inserts, or missing ones');
    const have = new Set(ids);
    assert.deepEqual(
      acked.filter((id) => !have.has(id)),
      [],
    );
    for (let w = 0; w <= WRITERS; w++) {
      // Each writer's inserts are numbered from 0 with no gap.
      const n = acked.filter((id) => id.startsWith(`${w}-`)).length;
      assert.equal(await inserts.countDocuments({ w }), n);
      assert.equal(await inserts.countDocuments({ w, i: { $gte: n } }), 0);
    }
  });

  test('no read failed (retryable reads in the same window)', () => {
    assert.ok(reads > 50, `only ${reads} reads in the window`);
    assert.deepEqual(readErrors.slice(0, 5), []);
    const failed = events.filter((e) => e.kind === 'failed' && e.name === 'find');
    assert.deepEqual(
      failed.slice(0, 5).map((e) => `${e.failure?.code}: ${e.failure?.message}`),
      [],
    );
  });
});
