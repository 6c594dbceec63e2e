// Client authentication through the proxy, over TLS: proxy E (-users,
// -tls-cert, -tls-key, -tls-ca), in front of the replica set. SCRAM-SHA-256
// and SCRAM-SHA-1 users, a wrong password, a client without credentials,
// MONGODB-X509 with the client certificate, a cursor of one user that
// another tries to read, and mongosh reading proxyStatus.
//
// TestNode gives the proxy's URI (without credentials or TLS options),
// the users' passwords by name (alice: SCRAM-SHA-256; bob: SCRAM-SHA-256 and
// SCRAM-SHA-1), the CA that signed the proxy's certificate and a client
// certificate and key whose subject is an X.509 user of the proxy.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { clientOptions, env, mongodb, mongoshBin, TIMEOUT_MS } from './proxytest.mjs';

const { MongoClient, MongoServerError } = mongodb;

// authURI returns the proxy's URI over TLS with the test CA, as user (with
// its password) when given, and the options besides.
function authURI(user, options = {}) {
  const u = new URL(env('PROXY_AUTH_URI'));
  if (user) {
    u.username = encodeURIComponent(user);
    u.password = encodeURIComponent(passwords()[user] ?? 'no such user');
  }
  const params = { tls: 'true', tlsCAFile: env('PROXY_TLS_CA_FILE'), ...options };
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.toString();
}

function passwords() {
  return JSON.parse(env('PROXY_AUTH_USERS'));
}

// clients collects the tests' clients, closed at the end.
const clients = [];
function newClient(uri, options = {}) {
  const c = new MongoClient(uri, { ...clientOptions, ...options });
  clients.push(c);
  return c;
}
after(async () => {
  await Promise.all(clients.map((c) => c.close()));
});

// crud runs inserts, a find, an update, a delete and a count in a
// collection of its own through client, and checks their results.
async function crud(client, name) {
  const coll = client.db('auth').collection(name);
  await coll.deleteMany({});
  const inserted = await coll.insertMany([{ _id: 1, n: 'one' }, { _id: 2, n: 'two' }, { _id: 3, n: 'three' }]);
  assert.equal(inserted.insertedCount, 3);
  const updated = await coll.updateOne({ _id: 2 }, { $set: { n: 'deux' } });
  assert.equal(updated.modifiedCount, 1);
  const deleted = await coll.deleteOne({ _id: 3 });
  assert.equal(deleted.deletedCount, 1);
  assert.deepEqual(await coll.find({}, { sort: { _id: 1 } }).toArray(), [
    { _id: 1, n: 'one' },
    { _id: 2, n: 'deux' },
  ]);
  assert.equal(await coll.countDocuments(), 2);
}

describe('client authentication through the proxy, over TLS', () => {
  test('SCRAM-SHA-256 over TLS: CRUD', async () => {
    const client = newClient(authURI('alice', { authMechanism: 'SCRAM-SHA-256', appName: 'auth-scram-256' }));
    await client.connect();
    await crud(client, 'alice');
  });

  test('SCRAM-SHA-1, for a user derived with both mechanisms: CRUD', async () => {
    const client = newClient(authURI('bob', { authMechanism: 'SCRAM-SHA-1' }));
    await client.connect();
    await crud(client, 'bob');
  });

  test('a wrong password: Authentication failed', async () => {
    const u = new URL(authURI('alice'));
    u.password = 'wrong-password';
    const client = newClient(u.toString(), { serverSelectionTimeoutMS: 5_000 });
    await assert.rejects(
      async () => {
        await client.connect();
        await client.db('auth').collection('alice').findOne({});
      },
      (err) => {
        assert.match(err.message, /Authentication failed/);
        return true;
      },
    );
  });

  test('no credentials: the handshake and ping, then Unauthorized (13)', async () => {
    const client = newClient(authURI(null));
    await client.connect();
    assert.equal((await client.db('admin').command({ ping: 1 })).ok, 1);
    await assert.rejects(client.db('auth').collection('alice').findOne({}), (err) => {
      assert.ok(err instanceof MongoServerError, String(err));
      assert.equal(err.code, 13);
      assert.match(err.message, /requires authentication/);
      return true;
    });
  });

  // mongod's reply is { ok: 0, errmsg: 'command find requires
  // authentication', code: 13, codeName: 'Unauthorized' }; drivers and
  // shells show the codeName.
  test(
    "no credentials: the error's codeName is Unauthorized, as mongod's",
    async () => {
      const client = newClient(authURI(null));
      await client.connect();
      await assert.rejects(client.db('auth').collection('alice').findOne({}), (err) => {
        assert.equal(err.code, 13);
        assert.equal(err.codeName, 'Unauthorized');
        return true;
      });
    },
  );

  test('MONGODB-X509 with the client certificate over TLS: CRUD', async () => {
    const client = newClient(
      authURI(null, { authMechanism: 'MONGODB-X509', tlsCertificateKeyFile: env('PROXY_TLS_CLIENT_FILE') }),
    );
    await client.connect();
    await crud(client, 'x509');
  });

  test("a user's cursor: another user's getMore is Unauthorized, the owner reads on", async () => {
    const alice = newClient(authURI('alice'));
    const bob = newClient(authURI('bob'));
    await Promise.all([alice.connect(), bob.connect()]);
    const db = alice.db('auth');
    await db.collection('cursor').deleteMany({});
    await db.collection('cursor').insertMany(Array.from({ length: 5 }, (_, i) => ({ _id: i })));
    const found = await db.command({ find: 'cursor', sort: { _id: 1 }, batchSize: 2 });
    const id = found.cursor.id;
    assert.notEqual(String(id), '0');
    await assert.rejects(bob.db('auth').command({ getMore: id, collection: 'cursor' }), (err) => {
      assert.ok(err instanceof MongoServerError, String(err));
      assert.equal(err.code, 13, err.message);
      return true;
    });
    // The cursor is still alice's, whole.
    const more = await db.command({ getMore: id, collection: 'cursor', batchSize: 10 });
    assert.deepEqual(
      [...found.cursor.firstBatch, ...more.cursor.nextBatch].map((d) => d._id),
      [0, 1, 2, 3, 4],
    );
  });
});

describe('mongosh through the proxy, authenticated over TLS', () => {
  let home;
  before(async () => {
    home = await mkdtemp(join(tmpdir(), 'proxy-mongosh-auth-'));
    await mkdir(join(home, '.mongodb', 'mongosh'), { recursive: true });
    await writeFile(join(home, '.mongodb', 'mongosh', 'config'), JSON.stringify({ enableTelemetry: false }));
  });
  after(async () => {
    await rm(home, { recursive: true, force: true });
  });

  test('SCRAM-SHA-256 over TLS, then proxyStatus with its clients', async () => {
    const script = 'print(EJSON.stringify(db.adminCommand({ proxyStatus: 1, clients: true }), { relaxed: true }))';
    const uri = authURI('alice', { authMechanism: 'SCRAM-SHA-256' });
    const out = await new Promise((resolve, reject) => {
      execFile(
        mongoshBin,
        ['--quiet', uri, '--eval', script],
        { env: { ...process.env, HOME: home }, timeout: TIMEOUT_MS, killSignal: 'SIGKILL' },
        (err, stdout, stderr) => {
          if (err) reject(new Error(`mongosh: ${err.message}\nstdout:\n${stdout}\nstderr:\n${stderr}`));
          else resolve(stdout);
        },
      );
    });
    let status;
    try {
      status = JSON.parse(out.trim().split('\n').at(-1));
    } catch (err) {
      throw new Error(`mongosh printed no JSON last: ${err.message}\n${out}`);
    }
    assert.equal(status.ok, 1, out);
    // mongosh names itself in its handshake: "mongosh 2.12.0".
    const apps = Object.keys(status.clients.byAppName);
    const mongoshApp = apps.find((name) => /^mongosh \d/.test(name));
    assert.ok(mongoshApp, `no mongosh application among ${JSON.stringify(apps)}`);
    assert.ok(status.clients.byAppName[mongoshApp].connections >= 1, out);
    assert.ok(
      status.clients.list.some((c) => c.appName === mongoshApp),
      `mongosh's connection is not listed: ${JSON.stringify(status.clients.list)}`,
    );
    // The upstreams: the replica set's three members, with their pools.
    assert.match(status.topologyType, /^ReplicaSet/, out);
    assert.equal(status.upstreams.length, 3, out);
    for (const u of status.upstreams) {
      assert.match(u.address, /^127\.0\.0\.1:\d+$/);
      assert.ok(['RSPrimary', 'RSSecondary'].includes(u.type), JSON.stringify(u));
    }
  });
});
