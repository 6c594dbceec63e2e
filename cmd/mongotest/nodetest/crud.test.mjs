// The official Node.js driver against a standalone mongotest: CRUD, a
// cursor that needs getMore, a unique index's duplicate key error, and TLS
// with a user, through the connection string the command prints.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MongoClient, MongoServerError, MongoBulkWriteError } from 'mongodb';
import { TIMEOUT_MS, startMongotest, stopChecked } from './mongotest.mjs';

const clientOptions = { serverSelectionTimeoutMS: 10_000, connectTimeoutMS: 10_000 };

describe('a standalone', { timeout: 4 * TIMEOUT_MS }, () => {
  let m;
  let client;
  const started = []; // the commandStarted events
  before(async () => {
    m = await startMongotest();
    client = new MongoClient(m.uri, { ...clientOptions, monitorCommands: true });
    client.on('commandStarted', (e) => started.push(e));
    await client.connect();
  });
  after(async () => {
    await client?.close();
    await stopChecked(m);
  });

  test('CRUD', async () => {
    const people = client.db('app').collection('people');
    const one = await people.insertOne({ name: 'ada', born: 1815 });
    assert.ok(one.insertedId);
    const many = await people.insertMany([
      { name: 'alan', born: 1912 },
      { name: 'grace', born: 1906 },
      { name: 'edsger', born: 1930 },
    ]);
    assert.equal(many.insertedCount, 3);

    const grace = await people.findOne({ name: 'grace' }, { projection: { _id: 0 } });
    assert.deepEqual(grace, { name: 'grace', born: 1906 });

    const upd = await people.updateOne({ name: 'alan' }, { $set: { field: 'computing' }, $inc: { born: 0 } });
    assert.equal(upd.matchedCount, 1);
    assert.equal(upd.modifiedCount, 1);
    const rep = await people.replaceOne({ name: 'edsger' }, { name: 'edsger', born: 1930, prize: 'Turing' });
    assert.equal(rep.modifiedCount, 1);
    const ups = await people.updateOne({ name: 'barbara' }, { $set: { born: 1939 } }, { upsert: true });
    assert.equal(ups.upsertedCount, 1);

    const before1920 = await people
      .find({ born: { $lt: 1920 } }, { projection: { _id: 0, name: 1 } })
      .sort({ born: 1 })
      .toArray();
    assert.deepEqual(before1920, [{ name: 'ada' }, { name: 'grace' }, { name: 'alan' }]);

    const del = await people.deleteOne({ name: 'ada' });
    assert.equal(del.deletedCount, 1);
    assert.equal(await people.countDocuments(), 4);
    assert.equal(await people.countDocuments({ prize: 'Turing' }), 1);

    const summary = await people
      .aggregate([
        { $match: { born: { $gte: 1900 } } },
        { $group: { _id: null, n: { $sum: 1 }, first: { $min: '$born' }, last: { $max: '$born' } } },
        { $project: { _id: 0 } },
      ])
      .toArray();
    assert.deepEqual(summary, [{ n: 4, first: 1906, last: 1939 }]);
  });

  test('a cursor with getMore', async () => {
    const nums = client.db('app').collection('numbers');
    await nums.insertMany(Array.from({ length: 23 }, (_, n) => ({ n })));
    const from = started.length;
    const seen = [];
    for await (const doc of nums.find({}, { batchSize: 5 }).sort({ n: 1 })) {
      seen.push(doc.n);
    }
    assert.deepEqual(seen, Array.from({ length: 23 }, (_, n) => n));
    const getMores = started.slice(from).filter((e) => e.commandName === 'getMore');
    // 5 in the find's first batch, then 5, 5, 5 and the last 3.
    assert.equal(getMores.length, 4, `getMores: ${getMores.length}`);
    for (const g of getMores) assert.equal(g.command.batchSize, 5);
  });

  test('a unique index: duplicate key errors', async () => {
    const users = client.db('app').collection('users');
    await users.createIndex({ email: 1 }, { unique: true, name: 'email_1' });
    await users.insertOne({ email: 'a@example.com' });

    const err = await users.insertOne({ email: 'a@example.com' }).then(
      () => assert.fail('a duplicate key was inserted'),
      (e) => e,
    );
    assert.ok(err instanceof MongoServerError, `${err}`);
    assert.equal(err.code, 11000);
    assert.match(err.message, /E11000 duplicate key error/);
    assert.deepEqual(err.keyValue, { email: 'a@example.com' });

    // An ordered insertMany stops at the duplicate, after the documents
    // before it.
    const bulk = await users
      .insertMany([{ email: 'b@example.com' }, { email: 'a@example.com' }, { email: 'c@example.com' }])
      .then(
        () => assert.fail('a duplicate key was inserted'),
        (e) => e,
      );
    assert.ok(bulk instanceof MongoBulkWriteError, `${bulk}`);
    assert.equal(bulk.insertedCount, 1);
    assert.equal(bulk.writeErrors[0]?.code ?? bulk.writeErrors.code, 11000);
    assert.equal(await users.countDocuments(), 2);

    const names = (await users.indexes()).map((i) => i.name).sort();
    assert.deepEqual(names, ['_id_', 'email_1']);
  });
});

describe('TLS and a user', { timeout: 4 * TIMEOUT_MS }, () => {
  let m;
  before(async () => {
    m = await startMongotest(['-tls', '-user', 'app:s3cr3t']);
  });
  after(async () => {
    await stopChecked(m);
  });

  test('the printed URI connects over TLS, authenticated', async () => {
    assert.match(m.uri, /^mongodb:\/\/app:s3cr3t@127\.0\.0\.1:\d+\/\?authSource=admin&tls=true&tlsCAFile=/);
    const client = new MongoClient(m.uri, clientOptions);
    try {
      await client.db('app').collection('c').insertOne({ x: 1 });
      assert.equal(await client.db('app').collection('c').countDocuments(), 1);
    } finally {
      await client.close();
    }
  });

  test('without credentials, no access', async () => {
    const { hosts, tls } = m.info;
    const anon = new MongoClient(`mongodb://${hosts[0]}/?tls=true&tlsCAFile=${encodeURIComponent(tls.caFile)}`, clientOptions);
    try {
      const err = await anon
        .db('app')
        .collection('c')
        .findOne({})
        .then(
          () => assert.fail('read without credentials'),
          (e) => e,
        );
      assert.equal(err.code, 13, `${err}`); // Unauthorized
    } finally {
      await anon.close();
    }
  });
});
