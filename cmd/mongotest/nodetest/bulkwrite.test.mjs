// The official Node.js driver's MongoClient.bulkWrite, which sends MongoDB
// 8.0's bulkWrite command, against a mongotest replica set started with
// -mongodb-version 8.0: writes of every kind on namespaces of two
// databases, their verbose results, write errors ordered and unordered, a
// retry forced by a fail point that runs the writes once, and a transaction.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MongoClient, MongoClientBulkWriteError } from 'mongodb';
import { TIMEOUT_MS, startMongotest, stopChecked } from './mongotest.mjs';

describe('MongoClient.bulkWrite against MongoDB 8.0', { timeout: 4 * TIMEOUT_MS }, () => {
  let m;
  let client;
  const started = []; // the bulkWrite commands sent
  before(async () => {
    m = await startMongotest(['-replset', '1', '-mongodb-version', '8.0']);
    client = new MongoClient(m.uri, { serverSelectionTimeoutMS: 10_000, monitorCommands: true, retryWrites: true });
    client.on('commandStarted', (e) => {
      if (e.commandName === 'bulkWrite') started.push(e);
    });
    await client.connect();
  });
  after(async () => {
    await client?.close();
    await stopChecked(m);
  });

  test('the server is 8.0', async () => {
    const info = await client.db('admin').command({ buildInfo: 1 });
    assert.equal(info.version, '8.0.0');
  });

  test('every kind of write, on two databases, with verbose results', async () => {
    await client.db('shop').collection('items').insertMany([
      { _id: 1, qty: 1 },
      { _id: 2, qty: 1 },
    ]);
    const result = await client.bulkWrite(
      [
        { namespace: 'shop.items', name: 'insertOne', document: { _id: 3, qty: 5 } },
        { namespace: 'shop.items', name: 'updateMany', filter: { qty: 1 }, update: { $inc: { qty: 1 } } },
        { namespace: 'audit.log', name: 'updateOne', filter: { _id: 'x' }, update: { $set: { seen: true } }, upsert: true },
        { namespace: 'shop.items', name: 'replaceOne', filter: { _id: 3 }, replacement: { qty: 0 } },
        { namespace: 'shop.items', name: 'deleteOne', filter: { _id: 1 } },
        { namespace: 'audit.log', name: 'deleteMany', filter: { nothing: true } },
      ],
      { verboseResults: true },
    );
    assert.equal(result.insertedCount, 1);
    assert.equal(result.matchedCount, 3);
    assert.equal(result.modifiedCount, 3);
    assert.equal(result.upsertedCount, 1);
    assert.equal(result.deletedCount, 1);
    assert.deepEqual(result.insertResults.get(0), { insertedId: 3 });
    assert.equal(result.updateResults.get(1).matchedCount, 2);
    assert.equal(result.updateResults.get(2).upsertedId, 'x');
    assert.equal(result.deleteResults.get(5).deletedCount, 0);
    assert.equal(started.length, 1, 'one bulkWrite command for the six writes');
    assert.equal(started[0].databaseName, 'admin');

    const items = await client.db('shop').collection('items').find().sort({ _id: 1 }).toArray();
    assert.deepEqual(items, [
      { _id: 2, qty: 2 },
      { _id: 3, qty: 0 },
    ]);
    assert.deepEqual(await client.db('audit').collection('log').findOne(), { _id: 'x', seen: true });
  });

  test('a duplicate key: ordered stops, unordered goes on', async () => {
    for (const ordered of [true, false]) {
      const ns = `errors.${ordered ? 'ordered' : 'unordered'}`;
      const models = [1, 1, 2].map((id) => ({ namespace: ns, name: 'insertOne', document: { _id: id } }));
      await assert.rejects(client.bulkWrite(models, { ordered }), (err) => {
        assert.ok(err instanceof MongoClientBulkWriteError, `${err}`);
        assert.deepEqual([...err.writeErrors.keys()], [1]);
        assert.equal(err.writeErrors.get(1).code, 11000);
        assert.equal(err.partialResult.insertedCount, ordered ? 1 : 2);
        return true;
      });
      const [db, coll] = ns.split('.');
      assert.equal(await client.db(db).collection(coll).countDocuments(), ordered ? 1 : 2);
    }
  });

  // The write concern error comes after the writes ran: the retry, with the
  // same txnNumber, gets their results without running them again.
  test('a bulkWrite retried after a write concern error runs once', async () => {
    const fp = await m.control('/failpoint', {
      body: {
        configureFailPoint: 'failCommand',
        mode: { times: 1 },
        data: { failCommands: ['bulkWrite'], writeConcernError: { code: 262, errmsg: 'operation exceeded time limit' } },
      },
    });
    assert.equal(fp.status, 200, JSON.stringify(fp.json));
    const from = started.length;
    const result = await client.bulkWrite([
      { namespace: 'retry.c', name: 'insertOne', document: { _id: 1 } },
      { namespace: 'retry.c', name: 'updateOne', filter: { _id: 1 }, update: { $inc: { n: 1 } } },
    ]);
    assert.equal(result.insertedCount, 1);
    assert.equal(result.modifiedCount, 1);
    const sent = started.slice(from);
    assert.equal(sent.length, 2, 'the failed bulkWrite and its retry');
    assert.deepEqual(sent[1].command.txnNumber, sent[0].command.txnNumber);
    assert.deepEqual(await client.db('retry').collection('c').find().toArray(), [{ _id: 1, n: 1 }]);
  });

  test('in a transaction, aborted', async () => {
    const session = client.startSession();
    try {
      session.startTransaction();
      const result = await client.bulkWrite([{ namespace: 'txn.c', name: 'insertOne', document: { _id: 1 } }], { session });
      assert.equal(result.insertedCount, 1);
      await session.abortTransaction();
    } finally {
      await session.endSession();
    }
    assert.equal(await client.db('txn').collection('c').countDocuments(), 0);
  });
});
