// CRUD with the official Node.js driver through the proxy, in front of a
// replica set of three: the driver sees a mongos, and each operation's
// outcome is the server's.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { clientOptions, commandCount, env, hostOf, mongodb, recordCommands } from './proxytest.mjs';

const { MongoClient, MongoServerError } = mongodb;

describe('CRUD through the proxy (replica set upstream)', () => {
  let client;
  let events;
  let people;
  before(async () => {
    client = new MongoClient(env('PROXY_URI'), clientOptions);
    events = recordCommands(client);
    await client.connect();
    people = client.db('crud').collection('people');
  });
  after(async () => {
    await client?.close();
  });

  test('the driver sees a mongos', async () => {
    const hello = await client.db('admin').command({ hello: 1 });
    assert.equal(hello.msg, 'isdbgrid');
    assert.equal(hello.isWritablePrimary, true);
    assert.ok(hello.maxWireVersion >= 8, `maxWireVersion ${hello.maxWireVersion}`);
  });

  test('insertOne', async () => {
    const inserts = await commandCount(env('MONGOTEST_CONTROL'), 'insert');
    const res = await people.insertOne({ _id: 'ada', name: 'Ada', born: 1815 });
    assert.equal(res.acknowledged, true);
    assert.equal(res.insertedId, 'ada');
    // The insert reached the upstream replica set, through the proxy.
    assert.equal(await commandCount(env('MONGOTEST_CONTROL'), 'insert'), inserts + 1);
    const sent = events.findLast((e) => e.kind === 'started' && e.name === 'insert');
    assert.equal(sent.address, hostOf(env('PROXY_URI')));
    assert.ok(sent.command.txnNumber !== undefined, 'a retryable write carries a txnNumber');
  });

  test('insertMany', async () => {
    const res = await people.insertMany([
      { _id: 'alan', name: 'Alan', born: 1912 },
      { _id: 'grace', name: 'Grace', born: 1906 },
      { _id: 'edsger', name: 'Edsger', born: 1930 },
      { _id: 'barbara', name: 'Barbara', born: 1939 },
    ]);
    assert.equal(res.insertedCount, 4);
    assert.deepEqual(Object.values(res.insertedIds), ['alan', 'grace', 'edsger', 'barbara']);
  });

  test('find, with a filter, a sort and a projection', async () => {
    const docs = await people
      .find({ born: { $lt: 1920 } }, { sort: { born: 1 }, projection: { _id: 0, name: 1 } })
      .toArray();
    assert.deepEqual(docs, [{ name: 'Ada' }, { name: 'Grace' }, { name: 'Alan' }]);
    assert.deepEqual(await people.findOne({ _id: 'edsger' }), { _id: 'edsger', name: 'Edsger', born: 1930 });
    assert.equal(await people.findOne({ _id: 'nobody' }), null);
  });

  test('updateOne', async () => {
    const res = await people.updateOne({ _id: 'alan' }, { $set: { field: 'computing' } });
    assert.equal(res.matchedCount, 1);
    assert.equal(res.modifiedCount, 1);
    assert.equal((await people.findOne({ _id: 'alan' })).field, 'computing');
    const upsert = await people.updateOne({ _id: 'tim' }, { $set: { name: 'Tim', born: 1955 } }, { upsert: true });
    assert.equal(upsert.upsertedCount, 1);
    assert.equal(upsert.upsertedId, 'tim');
  });

  test('updateMany and findOneAndUpdate', async () => {
    const res = await people.updateMany({ born: { $gte: 1930 } }, { $inc: { born: 0 }, $set: { modern: true } });
    assert.equal(res.matchedCount, 3);
    const before = await people.findOneAndUpdate({ _id: 'grace' }, { $set: { rank: 'admiral' } });
    assert.equal(before.rank, undefined);
    assert.equal((await people.findOne({ _id: 'grace' })).rank, 'admiral');
  });

  test('countDocuments and estimatedDocumentCount', async () => {
    assert.equal(await people.countDocuments(), 6);
    assert.equal(await people.countDocuments({ modern: true }), 3);
    assert.equal(await people.estimatedDocumentCount(), 6);
  });

  test('aggregate', async () => {
    const out = await people
      .aggregate([
        { $match: { born: { $lt: 1950 } } },
        { $group: { _id: '$modern', n: { $sum: 1 }, first: { $min: '$born' } } },
        { $sort: { first: 1 } },
      ])
      .toArray();
    assert.deepEqual(out, [
      { _id: null, n: 3, first: 1815 },
      { _id: true, n: 2, first: 1930 },
    ]);
  });

  test('deleteMany', async () => {
    const res = await people.deleteMany({ modern: true });
    assert.equal(res.deletedCount, 3);
    assert.equal(await people.countDocuments(), 3);
    assert.equal((await people.deleteOne({ _id: 'ada' })).deletedCount, 1);
  });

  test('bulkWrite', async () => {
    const res = await people.bulkWrite([
      { insertOne: { document: { _id: 'linus', born: 1969 } } },
      { updateOne: { filter: { _id: 'linus' }, update: { $set: { kernel: true } } } },
      { deleteOne: { filter: { _id: 'grace' } } },
    ]);
    assert.equal(res.insertedCount, 1);
    assert.equal(res.modifiedCount, 1);
    assert.equal(res.deletedCount, 1);
    assert.deepEqual((await people.find({}, { sort: { _id: 1 } }).toArray()).map((d) => d._id), ['alan', 'linus']);
  });

  // The replica set presents itself as MongoDB 8.0, and the proxy announces
  // its wire versions: the driver sends MongoClient.bulkWrite as one
  // bulkWrite command on admin, which the proxy sends to the primary.
  test('MongoClient.bulkWrite on two databases', async () => {
    const before = await commandCount(env('MONGOTEST_CONTROL'), 'bulkWrite');
    const res = await client.bulkWrite(
      [
        { namespace: 'crud.people', name: 'insertOne', document: { _id: 'barbara', born: 1939 } },
        { namespace: 'crud.people', name: 'updateOne', filter: { _id: 'barbara' }, update: { $set: { turing: 2008 } } },
        { namespace: 'crudlog.events', name: 'updateOne', filter: { _id: 'e1' }, update: { $set: { seen: 1 } }, upsert: true },
        { namespace: 'crud.people', name: 'deleteOne', filter: { _id: 'barbara' } },
      ],
      { verboseResults: true },
    );
    assert.equal(res.insertedCount, 1);
    assert.equal(res.modifiedCount, 1);
    assert.equal(res.upsertedCount, 1);
    assert.equal(res.deletedCount, 1);
    assert.equal(res.updateResults.get(2).upsertedId, 'e1');
    assert.equal(await commandCount(env('MONGOTEST_CONTROL'), 'bulkWrite'), before + 1);
    const sent = events.findLast((e) => e.kind === 'started' && e.name === 'bulkWrite');
    assert.equal(sent.address, hostOf(env('PROXY_URI')));
    assert.deepEqual(await client.db('crudlog').collection('events').findOne(), { _id: 'e1', seen: 1 });
    assert.equal(await people.countDocuments({ _id: 'barbara' }), 0);
  });

  test('insertMany of 20 MB, in batches of document sequences near the 16 MB of a document', async () => {
    const big = client.db('crud').collection('big');
    await big.deleteMany({});
    const text = 'x'.repeat(10_000);
    const from = events.length;
    const res = await big.insertMany(Array.from({ length: 2000 }, (_, i) => ({ _id: i, text })));
    assert.equal(res.insertedCount, 2000);
    const batches = events.slice(from).filter((e) => e.kind === 'started' && e.name === 'insert');
    assert.ok(batches.length >= 2, `${batches.length} insert commands for 20 MB`);
    assert.equal(
      batches.reduce((n, e) => n + e.command.documents.length, 0),
      2000,
    );
    assert.equal(await big.countDocuments(), 2000);
    assert.equal((await big.findOne({ _id: 1999 })).text, text);
    assert.equal(await big.drop(), true);
  });

  test('unacknowledged writes (w: 0, sent with moreToCome)', async () => {
    const fire = client.db('crud').collection('fire', { writeConcern: { w: 0 } });
    for (let i = 0; i < 10; i++) {
      const res = await fire.insertOne({ _id: i });
      assert.equal(res.acknowledged, false);
    }
    // They are not answered: a read shows them once they are done.
    const acked = client.db('crud').collection('fire');
    const deadline = Date.now() + 5_000;
    let n;
    while ((n = await acked.countDocuments()) < 10 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(n, 10);
    assert.equal((await fire.deleteMany({})).acknowledged, false);
    while ((n = await acked.countDocuments()) > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(n, 0);
  });

  test("a server's error comes back as the server gave it: a duplicate key", async () => {
    const err = await people.insertOne({ _id: 'alan' }).catch((e) => e);
    assert.ok(err instanceof MongoServerError, `${err}`);
    assert.equal(err.code, 11000);
    assert.match(err.message, /duplicate key/);
    // and the client goes on
    assert.equal(await people.countDocuments({ _id: 'alan' }), 1);
  });

  test('a command error: an unknown command', async () => {
    const err = await client.db('crud').command({ noSuchCommand: 1 }).catch((e) => e);
    assert.ok(err instanceof MongoServerError, `${err}`);
    assert.equal(err.code, 59);
  });

  test('listCollections, drop', async () => {
    const names = (await client.db('crud').listCollections().toArray()).map((c) => c.name);
    assert.ok(names.includes('people'), `${names}`);
    assert.equal(await people.drop(), true);
    assert.equal(await people.countDocuments(), 0);
  });
});
