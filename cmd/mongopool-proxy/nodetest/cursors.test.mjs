// Cursors through the proxy: getMores (a batchSize smaller than the
// result), two proxies in one seed list (the driver balances over them as
// over two mongoses, and sends a cursor's getMores to the one that made
// it: each proxy maps its own cursors), and killCursors for a cursor closed
// early, which must reach the upstream server.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { clientOptions, commandCount, control, env, hostOf, mongodb, recordCommands, replicaSetStats } from './proxytest.mjs';

const { MongoClient, MongoServerError } = mongodb;

const N = 25; // documents in the collection

// key turns a cursor id (a Long, a bigint or a number) into a string.
const key = (id) => String(id);

describe('cursors through one proxy (replica set upstream)', () => {
  let client;
  let events;
  let items;
  before(async () => {
    client = new MongoClient(env('PROXY_URI'), clientOptions);
    events = recordCommands(client);
    await client.connect();
    items = client.db('cursors').collection('items');
    await items.deleteMany({});
    await items.insertMany(Array.from({ length: N }, (_, i) => ({ _id: i, odd: i % 2 === 1 })));
  });
  after(async () => {
    await client?.close();
  });

  test('find with batchSize 3: every document once, through getMores on the proxy cursor', async () => {
    const from = events.length;
    const docs = await items.find({}, { batchSize: 3, sort: { _id: 1 } }).toArray();
    assert.deepEqual(
      docs.map((d) => d._id),
      Array.from({ length: N }, (_, i) => i),
    );
    const mine = events.slice(from);
    const find = mine.find((e) => e.kind === 'succeeded' && e.name === 'find');
    const id = key(find.reply.cursor.id);
    assert.notEqual(id, '0');
    const getMores = mine.filter((e) => e.kind === 'started' && e.name === 'getMore');
    assert.equal(getMores.length, Math.ceil(N / 3) - 1);
    for (const g of getMores) assert.equal(key(g.command.getMore), id, 'each getMore names the cursor of the find');
    const last = mine.findLast((e) => e.kind === 'succeeded' && e.name === 'getMore');
    assert.equal(key(last.reply.cursor.id), '0', 'the last batch closes the cursor');
    assert.equal(mine.filter((e) => e.kind === 'failed').length, 0);
  });

  test('aggregate with batchSize 4: getMores', async () => {
    const from = events.length;
    const docs = await items.aggregate([{ $match: { odd: true } }, { $sort: { _id: -1 } }], { batchSize: 4 }).toArray();
    assert.deepEqual(
      docs.map((d) => d._id),
      Array.from({ length: 12 }, (_, i) => 23 - 2 * i),
    );
    const getMores = events.slice(from).filter((e) => e.kind === 'succeeded' && e.name === 'getMore');
    assert.equal(getMores.length, 2);
  });

  test('a cursor read from a secondary: its getMores go to that secondary', async () => {
    const ctl = env('MONGOTEST_CONTROL');
    const counts = async () =>
      (await replicaSetStats(ctl)).map((m) => ({ find: m.commands?.find ?? 0, getMore: m.commands?.getMore ?? 0 }));
    // Every member has the documents before the secondary read.
    await items.updateMany({}, { $set: { seen: true } }, { writeConcern: { w: 3 } });
    const before = await counts();
    const docs = await items.find({}, { batchSize: 5, readPreference: 'secondary' }).toArray();
    assert.equal(docs.length, N);
    const delta = (await counts()).map((m, i) => ({ find: m.find - before[i].find, getMore: m.getMore - before[i].getMore }));
    const members = (await control(ctl, '/status', { method: 'GET' })).json.members;
    const at = delta.findIndex((d) => d.find === 1);
    assert.ok(at >= 0, JSON.stringify(delta));
    assert.equal(members[at].state, 'SECONDARY', `the find went to ${JSON.stringify(members[at])}`);
    delta.forEach((d, i) => {
      assert.deepEqual(d, i === at ? { find: 1, getMore: 4 } : { find: 0, getMore: 0 }, JSON.stringify(delta));
    });
  });

  test('a cursor closed early: killCursors reaches the server of the cursor', async () => {
    const ctl = env('MONGOTEST_CONTROL');
    const killsBefore = await commandCount(ctl, 'killCursors');
    const from = events.length;
    const cursor = items.find({}, { batchSize: 2 });
    assert.equal((await cursor.next())._id, 0);
    assert.equal((await cursor.next())._id, 1);
    assert.equal((await cursor.next())._id, 2); // one getMore
    await cursor.close();
    const mine = events.slice(from);
    const id = key(mine.find((e) => e.kind === 'succeeded' && e.name === 'find').reply.cursor.id);
    const kill = mine.find((e) => e.kind === 'succeeded' && e.name === 'killCursors');
    assert.ok(kill, 'closing the cursor sent killCursors, and it succeeded');
    assert.deepEqual(kill.reply.cursorsKilled.map(key), [id], JSON.stringify(kill.reply));
    assert.deepEqual(kill.reply.cursorsNotFound ?? [], []);
    assert.equal(await commandCount(ctl, 'killCursors'), killsBefore + 1, 'the upstream server received one killCursors');

    // The cursor is gone: a getMore for it now fails with CursorNotFound.
    const err = await client
      .db('cursors')
      .command({ getMore: mongodb.Long.fromString(id), collection: 'items' })
      .catch((e) => e);
    assert.ok(err instanceof MongoServerError, `${err}`);
    assert.equal(err.code, 43);
  });
});

describe('cursors through two proxies in one seed list', () => {
  let pair;
  let events;
  let a;
  let b;
  before(async () => {
    a = hostOf(env('PROXY_URI'));
    b = hostOf(env('PROXY2_URI'));
    pair = new MongoClient(`mongodb://${a},${b}/`, clientOptions);
    events = recordCommands(pair);
    await pair.connect();
    const items = pair.db('cursors2').collection('items');
    await items.deleteMany({});
    await items.insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i })));
  });
  after(async () => {
    await pair?.close();
  });

  test('the driver sees two mongoses', async () => {
    const servers = new Set();
    for (let i = 0; i < 20 && servers.size < 2; i++) {
      await pair.db('admin').command({ ping: 1 });
      servers.add(events.at(-1).address);
    }
    assert.deepEqual([...servers].sort(), [a, b].sort());
  });

  test("20 concurrent cursors over both proxies: each getMore goes to its cursor's proxy", async () => {
    const from = events.length;
    const items = pair.db('cursors2').collection('items');
    const results = await Promise.all(
      Array.from({ length: 20 }, () => items.find({}, { batchSize: 2, sort: { _id: 1 } }).toArray()),
    );
    for (const docs of results) {
      assert.deepEqual(
        docs.map((d) => d._id),
        Array.from({ length: 10 }, (_, i) => i),
      );
    }
    const mine = events.slice(from);
    assert.deepEqual(
      mine.filter((e) => e.kind === 'failed').map((e) => `${e.name}: ${e.failure}`),
      [],
    );
    // Where each cursor was made: its id, in the find's reply, to the proxy's
    // address.
    const madeAt = new Map();
    const started = new Map(mine.filter((e) => e.kind === 'started').map((e) => [e.requestId, e]));
    for (const e of mine.filter((e) => e.kind === 'succeeded' && e.name === 'find')) {
      madeAt.set(key(e.reply.cursor.id), e.address);
    }
    assert.equal(madeAt.size, 20, 'twenty cursors, with twenty ids');
    assert.deepEqual(new Set(madeAt.values()), new Set([a, b]), 'the cursors were made on both proxies');
    const getMores = mine.filter((e) => e.kind === 'succeeded' && e.name === 'getMore');
    assert.equal(getMores.length, 20 * 4);
    for (const g of getMores) {
      const id = key(started.get(g.requestId).command.getMore);
      assert.equal(g.address, madeAt.get(id), `the getMore of cursor ${id}`);
    }
  });

  test('a getMore sent to the other proxy: CursorNotFound, and the cursor lives on where it was made', async () => {
    const one = new MongoClient(env('PROXY_URI'), clientOptions);
    const two = new MongoClient(env('PROXY2_URI'), clientOptions);
    try {
      const db1 = one.db('cursors2');
      const db2 = two.db('cursors2');
      const opts = { useBigInt64: true };
      const first = await db1.command({ find: 'items', sort: { _id: 1 }, batchSize: 3 }, opts);
      const id = first.cursor.id;
      assert.equal(typeof id, 'bigint');
      assert.notEqual(id, 0n);
      const err = await db2.command({ getMore: id, collection: 'items', batchSize: 3 }, opts).catch((e) => e);
      assert.ok(err instanceof MongoServerError, `${err}`);
      assert.equal(err.code, 43);
      assert.equal(err.codeName, 'CursorNotFound');
      const more = await db1.command({ getMore: id, collection: 'items', batchSize: 3 }, opts);
      assert.deepEqual(
        more.cursor.nextBatch.map((d) => d._id),
        [3, 4, 5],
      );
      const killed = await db1.command({ killCursors: 'items', cursors: [id] }, opts);
      assert.deepEqual(killed.cursorsKilled, [id]);
    } finally {
      await one.close();
      await two.close();
    }
  });
});
