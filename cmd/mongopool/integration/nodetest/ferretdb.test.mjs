// The official Node.js driver and mongosh through the proxy to FerretDB, a
// server nobody here wrote: TestNodeThroughProxyToFerretDB
// (../proxy_ferretdb_test.go) starts both and gives the proxy's URI as
// PROXY_URI. The npm packages are cmd/mongotest/nodetest's (NODE_PACKAGES).

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const packages = process.env.NODE_PACKAGES;
const { MongoClient } = createRequire(join(packages, 'package.json'))('mongodb');
const mongosh = join(packages, 'node_modules', '.bin', 'mongosh');
const uri = process.env.PROXY_URI;
const TIMEOUT_MS = 20_000;

describe('the Node.js driver through the proxy to FerretDB', () => {
  let client;
  let coll;
  before(async () => {
    client = new MongoClient(uri, { serverSelectionTimeoutMS: TIMEOUT_MS });
    await client.connect();
    coll = client.db('nodeproxy').collection('items');
    await coll.deleteMany({});
  });
  after(async () => {
    await client?.close();
  });

  test('the proxy presents a mongos', async () => {
    const hello = await client.db('admin').command({ hello: 1 });
    assert.equal(hello.msg, 'isdbgrid');
  });

  test('CRUD', async () => {
    const docs = Array.from({ length: 30 }, (_, i) => ({ _id: i, sq: i * i }));
    const res = await coll.insertMany(docs);
    assert.equal(res.insertedCount, 30);
    assert.equal((await coll.updateOne({ _id: 3 }, { $set: { sq: -9 } })).modifiedCount, 1);
    assert.equal(await coll.countDocuments({ sq: { $lt: 0 } }), 1);
    assert.equal((await coll.deleteMany({ _id: { $gte: 25 } })).deletedCount, 5);
    assert.equal(await coll.countDocuments({}), 25);
  });

  test('a cursor through its getMores, and one closed early (killCursors)', async () => {
    const all = await coll.find({}, { batchSize: 4, sort: { _id: 1 } }).toArray();
    assert.equal(all.length, 25);
    assert.deepEqual(all.map((d) => d._id), Array.from({ length: 25 }, (_, i) => i));
    const cursor = coll.find({}, { batchSize: 2 });
    assert.ok(await cursor.next());
    const id = cursor.id;
    assert.ok(id && !id.isZero());
    await cursor.close();
    // Killed: its id is not found any more, at the proxy or upstream.
    await assert.rejects(
      client.db('nodeproxy').command({ getMore: id, collection: 'items' }),
      (err) => err.code === 43,
    );
  });

  test('a server error comes back as the server said it', async () => {
    await assert.rejects(coll.insertOne({ _id: 1 }), (err) => err.code === 11000);
  });
});

test('mongosh through the proxy to FerretDB', async () => {
  const script = `
    const c = db.getSiblingDB('nodeproxy').shell;
    c.drop();
    c.insertMany([{ a: 1 }, { a: 2 }, { a: 3 }]);
    print(JSON.stringify({ n: c.countDocuments({ a: { $gte: 2 } }), ping: db.adminCommand({ ping: 1 }).ok }));
  `;
  const { stdout } = await promisify(execFile)(mongosh, ['--quiet', '--nodb', '--eval', `db = connect(${JSON.stringify(uri)}); ${script}`], {
    timeout: TIMEOUT_MS,
    env: { ...process.env, MONGOSH_NO_UPDATE_CHECK: '1', NO_COLOR: '1' },
  });
  const out = JSON.parse(stdout.trim().split('\n').pop());
  assert.deepEqual(out, { n: 2, ping: 1 });
});
