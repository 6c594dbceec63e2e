// The load balancer persona: the driver with loadBalanced=true against the
// proxy's -listen-lb listener. The handshake gives it a serviceId, and it
// then pins each cursor and each transaction to one connection (the load
// balancer specification); the proxy, on its side, maps cursors and
// transactions by their ids and lsids, whatever the connection.

// orphanScript, run by node with a URI and the npm packages' directory,
// opens a transaction that updates the document {_id: 'x'} of lb.orphans,
// prints "open", and dies (SIGKILL) with the transaction open: its
// connections close, and it never ends its session.
const orphanScript = `
import { createRequire } from 'node:module';
import { join } from 'node:path';
const [uri, packages] = process.argv.slice(1);
const { MongoClient } = createRequire(join(packages, 'package.json'))('mongodb');
const client = new MongoClient(uri);
const session = client.startSession();
session.startTransaction();
await client.db('lb').collection('orphans').updateOne({ _id: 'x' }, { $inc: { n: 1 } }, { session });
console.log('open');
process.kill(process.pid, 'SIGKILL');
`;

// runOrphan runs orphanScript and resolves to its output and how it ended.
function runOrphan(uri) {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--input-type=module', '-e', orphanScript, uri, packages],
      { timeout: TIMEOUT_MS, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => resolve({ signal: err?.signal, stdout, stderr }),
    );
  });
}

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { clientOptions, env, mongodb, packages, recordCommands, TIMEOUT_MS, withTimeout } from './proxytest.mjs';

const { MongoClient, MongoServerError } = mongodb;

describe('the Node.js driver with loadBalanced=true, through the proxy', () => {
  let client;
  let events;
  let db;
  before(async () => {
    const uri = env('PROXY_LB_URI');
    assert.match(uri, /loadBalanced=true/);
    client = new MongoClient(uri, clientOptions);
    events = recordCommands(client);
    await client.connect();
    db = client.db('lb');
    for (const name of ['things', 'accounts']) await db.collection(name).deleteMany({});
  });
  after(async () => {
    await client?.close();
  });

  test('the handshake gave a serviceId: every command carries it', async () => {
    await db.command({ ping: 1 });
    const started = events.filter((e) => e.kind === 'started');
    assert.ok(started.length > 0);
    for (const e of started) assert.ok(e.serviceId, `${e.name} without a serviceId`);
  });

  test('CRUD', async () => {
    const things = db.collection('things');
    assert.equal((await things.insertOne({ _id: 'a', n: 1 })).insertedId, 'a');
    assert.equal((await things.insertMany([{ _id: 'b', n: 2 }, { _id: 'c', n: 3 }])).insertedCount, 2);
    assert.deepEqual(await things.find({ n: { $gte: 2 } }, { sort: { n: 1 } }).toArray(), [
      { _id: 'b', n: 2 },
      { _id: 'c', n: 3 },
    ]);
    const upd = await things.updateOne({ _id: 'a' }, { $inc: { n: 10 } });
    assert.equal(upd.modifiedCount, 1);
    assert.equal((await things.findOne({ _id: 'a' })).n, 11);
    assert.equal(await things.countDocuments(), 3);
    assert.deepEqual(await things.aggregate([{ $group: { _id: null, total: { $sum: '$n' } } }]).toArray(), [
      { _id: null, total: 16 },
    ]);
    assert.equal((await things.deleteMany({ n: { $lt: 5 } })).deletedCount, 2);
    const dup = await things.insertOne({ _id: 'a' }).catch((e) => e);
    assert.ok(dup instanceof MongoServerError, `${dup}`);
    assert.equal(dup.code, 11000);
  });

  test('a cursor with getMores, on the connection of its find', async () => {
    const things = db.collection('things');
    await things.insertMany(Array.from({ length: 17 }, (_, i) => ({ _id: `many-${String(i).padStart(2, '0')}`, i })));
    const from = events.length;
    const docs = await things.find({ i: { $gte: 0 } }, { sort: { i: 1 }, batchSize: 4 }).toArray();
    assert.deepEqual(
      docs.map((d) => d.i),
      Array.from({ length: 17 }, (_, i) => i),
    );
    const mine = events.slice(from).filter((e) => e.kind === 'started');
    const find = mine.find((e) => e.name === 'find');
    const getMores = mine.filter((e) => e.name === 'getMore');
    assert.equal(getMores.length, 4);
    for (const g of getMores) assert.equal(g.connectionId, find.connectionId, 'a getMore on another connection');

    // Closed early: killCursors, which the proxy answers with the cursor.
    const cursor = things.find({ i: { $gte: 0 } }, { batchSize: 2 });
    await cursor.next();
    await cursor.close();
    const kill = events.findLast((e) => e.kind === 'succeeded' && e.name === 'killCursors');
    assert.ok(kill, 'no killCursors');
    assert.equal(kill.reply.cursorsKilled.length, 1, JSON.stringify(kill.reply));
  });

  test('a transaction: commit, and abort by a throw', async () => {
    const accounts = db.collection('accounts');
    await accounts.insertMany([
      { _id: 'alice', balance: 10 },
      { _id: 'bob', balance: 0 },
    ]);
    const session = client.startSession();
    const from = events.length;
    try {
      await withTimeout(
        session.withTransaction(async (s) => {
          await accounts.updateOne({ _id: 'alice' }, { $inc: { balance: -4 } }, { session: s });
          await accounts.updateOne({ _id: 'bob' }, { $inc: { balance: 4 } }, { session: s });
          assert.equal((await accounts.findOne({ _id: 'bob' })).balance, 0, 'seen outside before the commit');
        }),
        TIMEOUT_MS,
        'withTransaction',
      );
      const err = await withTimeout(
        session.withTransaction(async (s) => {
          await accounts.updateOne({ _id: 'alice' }, { $inc: { balance: -100 } }, { session: s });
          throw new Error('insufficient funds');
        }),
        TIMEOUT_MS,
        'withTransaction',
      ).catch((e) => e);
      assert.equal(err.message, 'insufficient funds');
    } finally {
      await session.endSession();
    }
    assert.deepEqual(await accounts.find({}, { sort: { _id: 1 } }).toArray(), [
      { _id: 'alice', balance: 6 },
      { _id: 'bob', balance: 4 },
    ]);
    const txn = events.slice(from).filter((e) => e.kind === 'started' && e.command.txnNumber !== undefined);
    assert.deepEqual(
      txn.filter((e) => e.name.endsWith('Transaction')).map((e) => e.name),
      ['commitTransaction', 'abortTransaction'],
    );
    // The driver pins a transaction to its connection.
    const first = txn.filter((e) => e.command.txnNumber === txn[0].command.txnNumber);
    assert.deepEqual(new Set(first.map((e) => e.connectionId)).size, 1);
  });

  test('a write conflict between two sessions', async () => {
    const accounts = db.collection('accounts');
    const a = client.startSession();
    const b = client.startSession();
    try {
      a.startTransaction();
      await accounts.updateOne({ _id: 'bob' }, { $inc: { balance: 1 } }, { session: a });
      b.startTransaction();
      const err = await accounts.updateOne({ _id: 'bob' }, { $inc: { balance: 1 } }, { session: b }).catch((e) => e);
      assert.ok(err instanceof MongoServerError, `${err}`);
      assert.equal(err.code, 112);
      assert.ok(err.hasErrorLabel('TransientTransactionError'));
      await b.abortTransaction();
      await a.commitTransaction();
    } finally {
      await a.endSession();
      await b.endSession();
    }
    assert.equal((await accounts.findOne({ _id: 'bob' })).balance, 5);
  });

  // The load balancer specification ("Server-side changes"): "services must
  // abort a transaction when the connection associated with the transaction
  // is closed". A driver in load balanced mode pins a transaction to one
  // connection, and when the application dies, that connection's close is
  // all the service learns. The proxy aborts the transaction then: the next
  // write of the document does not wait for it.
  test(
    'a transaction whose client connection closes is aborted: its document is free at once',
    async () => {
      const orphans = db.collection('orphans');
      await orphans.deleteMany({});
      await orphans.insertOne({ _id: 'x', n: 0 });
      const child = await runOrphan(env('PROXY_LB_URI'));
      assert.equal(child.stdout.trim(), 'open', `the script did not open its transaction:\n${child.stderr}`);
      assert.equal(child.signal, 'SIGKILL');
      const started = Date.now();
      const res = await orphans.updateOne({ _id: 'x' }, { $inc: { n: 10 } }, { maxTimeMS: 5_000 }).catch((e) => e);
      assert.ok(!(res instanceof Error), `the write after the client's death: ${res} (after ${Date.now() - started} ms)`);
      assert.deepEqual(await orphans.findOne({ _id: 'x' }), { _id: 'x', n: 10 }, "the orphan transaction's write");
    },
  );
});
