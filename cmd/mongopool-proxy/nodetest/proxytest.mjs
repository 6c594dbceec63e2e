// What the Node.js tests of the proxy share: the npm packages, the
// deployment TestNode (../node_test.go) set up, and small helpers.
//
// The npm packages are those of the mongotest command's Node.js tests,
// installed once in cmd/mongotest/nodetest (npm ci --ignore-scripts):
// NODE_PACKAGES names that directory, which is the default.
//
// TestNode runs mongotest commands and, in front of them, proxies, and
// gives them to the tests in the environment:
//
//   PROXY_URI                 proxy A, a mongos in front of a replica set of three (MongoDB 8.0)
//   PROXY2_URI                proxy B, another one in front of the same set
//   PROXY_LB_URI              proxy A's load balancer listener (loadBalanced=true)
//   PROXY_SNAPPY_URI          proxy C, whose upstream URI has compressors=snappy
//   PROXY_SHARDED_URI         proxy D, in front of a sharded cluster (-mongos 2 -shards 2)
//   PROXY_LBUP_URI            proxy G, in front of a load balancer (a mongos behind one)
//   MONGOTEST_CONTROL         the replica set's control endpoint
//   MONGOTEST_SHARDED_CONTROL the sharded cluster's control endpoint
//   PROXY_AUTH_URI            proxy E, in front of the replica set, which authenticates its
//                             clients (-users) over TLS only
//   PROXY_AUTH_USERS          its SCRAM users' passwords by name, in JSON (alice, bob)
//   PROXY_TLS_CA_FILE         the CA that signed proxy E's certificate (PEM)
//   PROXY_TLS_CLIENT_FILE     a client certificate and its key (PEM), an X.509 user of proxy E

import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

export const packages = process.env.NODE_PACKAGES || join(here, '..', '..', 'mongotest', 'nodetest');
const require = createRequire(join(packages, 'package.json'));

// The official driver, as the package exports it.
export const mongodb = require('mongodb');

// mongosh's executable.
export const mongoshBin = join(packages, 'node_modules', '.bin', 'mongosh');

// Every wait of the tests is bounded by this.
export const TIMEOUT_MS = 20_000;

// The options of the tests' clients: a missing proxy fails a test in
// seconds, not in the driver's 30.
export const clientOptions = { serverSelectionTimeoutMS: 10_000, monitorCommands: true };

// env returns the environment variable name, which TestNode sets.
export function env(name) {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set: these tests run from the Go test TestNode (go test -run TestNode in cmd/mongopool-proxy)`);
  }
  return v;
}

// hostOf returns the host:port of a single-host mongodb:// URI.
export function hostOf(uri) {
  return new URL(uri).host;
}

// withTimeout settles as promise does, or rejects with what after ms.
export async function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// control sends a request to the mongotest control endpoint base and
// resolves to its HTTP status and JSON reply.
export async function control(base, path, { method = 'POST', body } = {}) {
  const res = await fetch(base + path, {
    method,
    body: body === undefined || typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  return { status: res.status, json: await res.json() };
}

// replicaSetStats resolves to the /stats of each member of the replica set
// of the control endpoint base.
export async function replicaSetStats(base) {
  const { status, json } = await control(base, '/stats', { method: 'GET' });
  if (status !== 200) throw new Error(`GET /stats: ${status} ${JSON.stringify(json)}`);
  return json.members;
}

// commandCount resolves to the number of commands name the members of the
// replica set of base have received.
export async function commandCount(base, name) {
  return (await replicaSetStats(base)).reduce((n, m) => n + (m.commands?.[name] ?? 0), 0);
}

// recordCommands records the command events of client: started, succeeded
// and failed, with the address and connection.
export function recordCommands(client) {
  const events = [];
  const add = (kind) => (e) =>
    events.push({
      kind,
      name: e.commandName,
      address: e.address,
      connectionId: e.connectionId,
      serviceId: e.serviceId,
      requestId: e.requestId,
      command: e.command,
      reply: e.reply,
      failure: e.failure,
    });
  client.on('commandStarted', add('started'));
  client.on('commandSucceeded', add('succeeded'));
  client.on('commandFailed', add('failed'));
  return events;
}
