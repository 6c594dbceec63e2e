// The proxy in front of a load balancer (proxy G: its upstream URI has
// loadBalanced=true), for the official Node.js driver, which sees a mongos:
// the proxy's hello carries the wire versions and the session timeout of
// its upstream connections' handshakes (no monitor describes the servers
// behind a load balancer); a cursor's getMores and a transaction's commands
// go over the upstream connection their first command held.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { clientOptions, env, mongodb, recordCommands } from './proxytest.mjs';

const { MongoClient } = mongodb;

const N = 10;

describe('the proxy in front of a load balancer', () => {
  let client;
  let events;
  let items;
  before(async () => {
    client = new MongoClient(env('PROXY_LBUP_URI'), clientOptions);
    events = recordCommands(client);
    await client.connect();
    items = client.db('lbup').collection('items');
    await items.deleteMany({});
    await items.insertMany(Array.from({ length: N }, (_, i) => ({ _id: i })));
  });
  after(async () => {
    await client?.close();
  });

  test('the hello: a mongos with the upstream wire versions and sessions', async () => {
    const hello = await client.db('admin').command({ hello: 1 });
    assert.equal(hello.msg, 'isdbgrid');
    assert.ok(hello.maxWireVersion >= 9, `maxWireVersion ${hello.maxWireVersion}`);
    assert.ok(hello.logicalSessionTimeoutMinutes > 0, 'sessions supported');
  });

  test('two cursors read in turns, each through its getMores', async () => {
    const a = items.find({}, { batchSize: 2, sort: { _id: 1 } });
    const b = items.find({}, { batchSize: 3, sort: { _id: -1 } });
    const gotA = [];
    const gotB = [];
    for (;;) {
      const [da, db] = await Promise.all([a.next(), b.next()]);
      if (da === null && db === null) break;
      if (da !== null) gotA.push(da._id);
      if (db !== null) gotB.push(db._id);
    }
    assert.deepEqual(gotA, Array.from({ length: N }, (_, i) => i));
    assert.deepEqual(gotB, Array.from({ length: N }, (_, i) => N - 1 - i));
  });

  test('a cursor closed early is killed on its mongos', async () => {
    const from = events.length;
    const c = items.find({}, { batchSize: 2 });
    assert.notEqual(await c.next(), null);
    await c.close();
    const kill = events.slice(from).find((e) => e.kind === 'succeeded' && e.name === 'killCursors');
    assert.ok(kill, 'the driver sent killCursors, and it succeeded');
    assert.equal(kill.reply.cursorsKilled.length, 1, `killCursors: ${JSON.stringify(kill.reply)}`);
  });

  test('withTransaction commits; a failed callback aborts', async () => {
    const txns = client.db('lbup').collection('txns');
    await txns.deleteMany({});
    const session = client.startSession();
    try {
      await session.withTransaction(async () => {
        await txns.insertOne({ _id: 1 }, { session });
        await txns.insertOne({ _id: 2 }, { session });
      });
      await assert.rejects(
        session.withTransaction(async () => {
          await txns.insertOne({ _id: 3 }, { session });
          throw new Error('abort');
        }),
        /abort/,
      );
    } finally {
      await session.endSession();
    }
    const ids = (await txns.find({}, { sort: { _id: 1 } }).toArray()).map((d) => d._id);
    assert.deepEqual(ids, [1, 2]);
  });
});
