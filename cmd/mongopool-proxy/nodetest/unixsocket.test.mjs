// The Node.js driver and mongosh through the proxy's Unix socket listener
// (the sidecar layout): the socket's path, escaped, as the host.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { clientOptions, commandCount, env, mongodb, mongoshBin, TIMEOUT_MS } from './proxytest.mjs';

const { MongoClient } = mongodb;

describe('the proxy on a Unix socket', () => {
  let client;
  before(async () => {
    client = new MongoClient(env('PROXY_UNIX_URI'), clientOptions);
    await client.connect();
  });
  after(async () => {
    await client?.close();
  });

  test('the driver connects to the socket and sees a mongos', async () => {
    assert.match(env('PROXY_UNIX_URI'), /^mongodb:\/\/%2F.*\.sock\/$/);
    const hello = await client.db('admin').command({ hello: 1 });
    assert.equal(hello.msg, 'isdbgrid');
  });

  test('CRUD reaches the replica set', async () => {
    const inserts = await commandCount(env('MONGOTEST_CONTROL'), 'insert');
    const coll = client.db('unix').collection('items');
    await coll.insertMany([{ _id: 1, v: 'a' }, { _id: 2, v: 'b' }]);
    assert.equal(await commandCount(env('MONGOTEST_CONTROL'), 'insert'), inserts + 1);
    assert.deepEqual(await coll.find({}, { sort: { _id: 1 } }).toArray(), [{ _id: 1, v: 'a' }, { _id: 2, v: 'b' }]);
    const res = await coll.updateOne({ _id: 2 }, { $set: { v: 'c' } });
    assert.equal(res.modifiedCount, 1);
    assert.equal((await coll.findOne({ _id: 2 })).v, 'c');
  });

  test('mongosh over the socket', async () => {
    const home = await mkdtemp(join(tmpdir(), 'proxy-mongosh-unix-'));
    try {
      await mkdir(join(home, '.mongodb', 'mongosh'), { recursive: true });
      await writeFile(join(home, '.mongodb', 'mongosh', 'config'), JSON.stringify({ enableTelemetry: false }));
      const out = await new Promise((resolve, reject) => {
        execFile(
          mongoshBin,
          ['--quiet', env('PROXY_UNIX_URI'), '--eval', 'print(JSON.stringify({ ok: db.adminCommand({ ping: 1 }).ok, msg: db.hello().msg }))'],
          { env: { ...process.env, HOME: home }, timeout: TIMEOUT_MS, killSignal: 'SIGKILL' },
          (err, stdout, stderr) => (err ? reject(new Error(`mongosh: ${err.message}\n${stdout}\n${stderr}`)) : resolve(stdout)),
        );
      });
      assert.deepEqual(JSON.parse(out.trim().split('\n').at(-1)), { ok: 1, msg: 'isdbgrid' });
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});
