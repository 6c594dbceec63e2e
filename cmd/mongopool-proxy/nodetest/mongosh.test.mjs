// mongosh through the proxy: a script of inserts, finds, an update and a
// count whose results it prints as JSON, db.adminCommand({ ping: 1 }),
// listDatabases and `show dbs`, and the same through the load balancer
// listener.
//
// mongosh is installed with `npm ci --ignore-scripts`: its optional native
// modules (kerberos, mongodb-client-encryption, os-dns-native, ...) are
// then not built, and mongosh goes on without them; none is needed here.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { env, mongoshBin, TIMEOUT_MS } from './proxytest.mjs';

// home is a HOME of the tests' own for mongosh, which writes its logs and
// history under it; its configuration turns telemetry off.
let home;

// mongosh runs mongosh with args and resolves to its standard output; it
// rejects with the output (and exitCode) if mongosh fails or takes longer
// than TIMEOUT_MS.
function mongosh(args) {
  return new Promise((resolve, reject) => {
    execFile(
      mongoshBin,
      args,
      { env: { ...process.env, HOME: home }, timeout: TIMEOUT_MS, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        if (err) {
          const e = new Error(`mongosh ${args.join(' ')}: ${err.message}\nstdout:\n${stdout}\nstderr:\n${stderr}`);
          e.exitCode = err.code; // a number when mongosh exited, not when killed
          reject(e);
        } else {
          resolve(stdout);
        }
      },
    );
  });
}

// lastJSON parses the last line of mongosh's output.
function lastJSON(out) {
  const lines = out.trim().split('\n');
  try {
    return JSON.parse(lines.at(-1));
  } catch (err) {
    throw new Error(`mongosh printed no JSON last: ${err.message}\n${out}`);
  }
}

const crud = `
const c = db.getSiblingDB('shell').people;
c.drop();
const inserted = c.insertMany([
  { name: 'ada', born: 1815 },
  { name: 'alan', born: 1912 },
  { name: 'grace', born: 1906 },
]);
const one = c.insertOne({ name: 'edsger', born: 1930 });
const updated = c.updateOne({ name: 'alan' }, { $set: { field: 'computing' } });
const deleted = c.deleteOne({ name: 'grace' });
print(JSON.stringify({
  inserted: Object.keys(inserted.insertedIds).length + (one.acknowledged ? 1 : 0),
  matched: updated.matchedCount,
  modified: updated.modifiedCount,
  deleted: deleted.deletedCount,
  count: c.countDocuments(),
  docs: c.find({ born: { $lt: 1920 } }, { _id: 0 }).sort({ born: 1 }).toArray(),
  batched: c.find().batchSize(1).toArray().length,
  ping: db.adminCommand({ ping: 1 }).ok,
  databases: db.adminCommand({ listDatabases: 1 }).databases.map((d) => d.name).filter((n) => n === 'shell'),
  hello: db.hello().msg,
}));
`;

before(async () => {
  home = await mkdtemp(join(tmpdir(), 'proxy-mongosh-'));
  await mkdir(join(home, '.mongodb', 'mongosh'), { recursive: true });
  await writeFile(join(home, '.mongodb', 'mongosh', 'config'), JSON.stringify({ enableTelemetry: false }));
});
after(async () => {
  await rm(home, { recursive: true, force: true });
});

for (const [persona, uriVar] of [
  ['mongos', 'PROXY_URI'],
  ['load balancer', 'PROXY_LB_URI'],
]) {
  describe(`mongosh through the proxy (${persona})`, () => {
    let uri;
    before(() => {
      uri = env(uriVar);
    });

    test('a script of inserts, finds, an update, a delete, ping and listDatabases', async () => {
      const out = await mongosh(['--quiet', uri, '--eval', crud]);
      assert.deepEqual(lastJSON(out), {
        inserted: 4,
        matched: 1,
        modified: 1,
        deleted: 1,
        count: 3,
        docs: [
          { name: 'ada', born: 1815 },
          { name: 'alan', born: 1912, field: 'computing' },
        ],
        batched: 3,
        ping: 1,
        databases: ['shell'],
        hello: 'isdbgrid',
      });
    });

    test('show dbs', async () => {
      const out = await mongosh(['--quiet', uri, '--eval', 'show dbs']);
      assert.match(out, /^shell\s+\d+/m, out);
      assert.match(out, /^admin\s+\d+/m, out);
    });

    test('a server error is printed as the server gave it, and the shell exits with 1', async () => {
      const err = await mongosh(['--quiet', uri, '--eval', 'db.getSiblingDB("shell").people.insertOne({ _id: 1 }); db.getSiblingDB("shell").people.insertOne({ _id: 1 })']).then(
        () => assert.fail('a duplicate key did not fail the script'),
        (e) => e,
      );
      assert.match(err.message, /E11000 duplicate key/);
      assert.equal(err.exitCode, 1, err.message);
    });
  });
}
