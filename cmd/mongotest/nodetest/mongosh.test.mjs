// mongosh, from the npm registry, against mongotest: a script of CRUD whose
// printed results are checked, `show dbs`, rs.status(), rs.conf(),
// rs.stepDown(), db.stats(), and TLS with a user.
//
// mongosh is installed with `npm ci --ignore-scripts`: its optional native
// modules (kerberos, mongodb-client-encryption, os-dns-native, ...) are
// then not built, and mongosh logs them as missing and goes on. None of
// them is needed here: no Kerberos, no client-side encryption, and the
// addresses are IP addresses, not mongodb+srv names.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { TIMEOUT_MS, startMongotest, stopChecked } from './mongotest.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const mongoshBin = join(here, 'node_modules', '.bin', 'mongosh');

// home is a HOME of the tests' own for mongosh, which writes its logs and
// history under it; its configuration turns telemetry off (a mongosh that
// runs a script sends none anyway, and an interactive one is never run).
let home;

// mongosh runs mongosh with args and resolves to its standard output; it
// rejects with the output if mongosh fails or takes longer than TIMEOUT_MS.
function mongosh(args) {
  return new Promise((resolve, reject) => {
    execFile(
      mongoshBin,
      args,
      {
        cwd: here,
        env: { ...process.env, HOME: home },
        timeout: TIMEOUT_MS,
        killSignal: 'SIGKILL',
      },
      (err, stdout, stderr) => {
        if (err) {
          reject(new Error(`mongosh ${args.join(' ')}: ${err.message}\nstdout:\n${stdout}\nstderr:\n${stderr}`));
        } else {
          resolve(stdout);
        }
      },
    );
  });
}

before(async () => {
  home = await mkdtemp(join(tmpdir(), 'mongotest-mongosh-'));
  await mkdir(join(home, '.mongodb', 'mongosh'), { recursive: true });
  await writeFile(join(home, '.mongodb', 'mongosh', 'config'), JSON.stringify({ enableTelemetry: false }));
});
after(async () => {
  await rm(home, { recursive: true, force: true });
});

test('mongosh runs without a database (--nodb)', async () => {
  assert.equal((await mongosh(['--nodb', '--quiet', '--eval', 'print(6 * 7)'])).trim(), '42');
});

describe('mongosh and a replica set', { timeout: 8 * TIMEOUT_MS }, () => {
  let m;
  before(async () => {
    m = await startMongotest(['-replset', '2']);
  });
  after(async () => {
    await stopChecked(m);
  });

  test('CRUD from a script', async () => {
    const out = await mongosh([m.uri, '--quiet', '--file', join(here, 'crud.mongosh.js')]);
    const lines = out.trim().split('\n');
    const result = JSON.parse(lines[lines.length - 1]);
    assert.deepEqual(result, {
      inserted: 3,
      matched: 1,
      modified: 1,
      deleted: 1,
      count: 2,
      docs: [
        { name: 'ada', born: 1815 },
        { name: 'alan', born: 1912, field: 'computing' },
      ],
      ping: 1,
    });
  });

  test('show dbs', async () => {
    await mongosh([m.uri, '--quiet', '--eval', 'db.getSiblingDB("listed").c.insertOne({ a: 1 }).acknowledged']);
    const out = await mongosh([m.uri, '--quiet', '--eval', 'show dbs']);
    assert.match(out, /^listed\s+\d+/m, out);
  });

  test('the shell finds the primary after a step-down', async () => {
    const { status } = await m.control('/stepdown');
    assert.equal(status, 200);
    const out = await mongosh([m.uri, '--quiet', '--eval', 'db.hello().me']);
    assert.equal(out.trim(), m.info.hosts[1]);
  });

  test('rs.status()', async () => {
    const out = await mongosh([m.uri, '--quiet', '--eval', 'JSON.stringify(rs.status().members.map((x) => x.stateStr))']);
    assert.deepEqual(JSON.parse(out), ['SECONDARY', 'PRIMARY']);
  });

  test('rs.conf()', async () => {
    const out = await mongosh([m.uri, '--quiet', '--eval', 'rs.conf().members.length']);
    assert.equal(out.trim(), '2');
  });

  // rs.stepDown() runs replSetStepDown on the primary, which hands the
  // election over to the electable secondary, as mongod does
  // (https://www.mongodb.com/docs/manual/reference/command/replSetStepDown/).
  test('rs.stepDown()', async () => {
    await mongosh([m.uri, '--quiet', '--eval', 'rs.stepDown(30)']);
    const out = await mongosh([m.uri, '--quiet', '--eval', 'JSON.stringify(rs.status().members.map((x) => x.stateStr))']);
    assert.deepEqual(JSON.parse(out), ['PRIMARY', 'SECONDARY']);
  });

  test('db.stats()', async () => {
    const out = await mongosh([m.uri, '--quiet', '--eval', 'db.getSiblingDB("listed").stats().collections']);
    assert.equal(out.trim(), '1');
  });
});

describe('mongosh over TLS, authenticated', { timeout: 4 * TIMEOUT_MS }, () => {
  let m;
  before(async () => {
    m = await startMongotest(['-tls', '-user', 'shell:pa55']);
  });
  after(async () => {
    await stopChecked(m);
  });

  test('the printed URI, as it is', async () => {
    const out = await mongosh([m.uri, '--quiet', '--eval', 'db.getSiblingDB("app").c.insertOne({ x: 1 }).acknowledged']);
    assert.equal(out.trim(), 'true');
  });

  test('connectionStatus', async () => {
    const out = await mongosh([m.uri, '--quiet', '--eval', 'db.runCommand({ connectionStatus: 1 }).authInfo.authenticatedUsers[0].user']);
    assert.equal(out.trim(), 'shell');
  });
});
