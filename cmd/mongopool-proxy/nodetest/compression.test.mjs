// Compression on both hops: the driver compresses its messages to the
// proxy, and the proxy, whose upstream URI has compressors=snappy, its own
// to the servers. The first hop is seen by a relay between the driver and
// the proxy that reads the messages' opcodes (OP_COMPRESSED is 2012); the
// second by the servers' counts of compressed messages (mongotest's
// /stats).
//
// The driver's compressor is zstd where the driver has it built in
// (Node.js 22.15 or later), zlib otherwise: snappy and, before Node.js
// 22.15, zstd need optional native npm packages that npm ci
// --ignore-scripts leaves out.

import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import zlib from 'node:zlib';
import { clientOptions, env, hostOf, mongodb, replicaSetStats } from './proxytest.mjs';

const { MongoClient } = mongodb;

const OP_COMPRESSED = 2012;
const clientCompressor = typeof zlib.zstdCompress === 'function' ? 'zstd' : 'zlib';

// opcodeCounter returns a function that takes the bytes of one direction of
// a connection, in the pieces they come in, and counts its messages by
// opcode into counts.
function opcodeCounter(counts) {
  let pending = Buffer.alloc(0);
  return (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 16) {
      const length = pending.readInt32LE(0);
      if (pending.length < length) break;
      const opCode = pending.readInt32LE(12);
      counts.set(opCode, (counts.get(opCode) ?? 0) + 1);
      pending = pending.subarray(length);
    }
  };
}

// startRelay listens on a free port and relays each connection to target
// (host:port), counting the messages each way by opcode.
async function startRelay(target) {
  const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
  const toProxy = new Map();
  const fromProxy = new Map();
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(port, host);
    sockets.add(client).add(upstream);
    const countTo = opcodeCounter(toProxy);
    const countFrom = opcodeCounter(fromProxy);
    client.on('data', (d) => {
      countTo(d);
      upstream.write(d);
    });
    upstream.on('data', (d) => {
      countFrom(d);
      client.write(d);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      s.on('close', end);
      s.on('error', end);
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${server.address().port}`,
    toProxy,
    fromProxy,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

// upstreamCompressed sums the replica set members' counts of compressed
// messages received and sent, by compressor.
async function upstreamCompressed() {
  const sum = { received: {}, sent: {} };
  for (const m of await replicaSetStats(env('MONGOTEST_CONTROL'))) {
    for (const [field, into] of [
      ['compressedReceived', sum.received],
      ['compressedSent', sum.sent],
    ]) {
      for (const [name, n] of Object.entries(m[field] ?? {})) into[name] = (into[name] ?? 0) + n;
    }
  }
  return sum;
}

describe(`compression: the driver to the proxy with ${clientCompressor}, the proxy to the servers with snappy`, () => {
  let relay;
  let client;
  let before0;
  before(async () => {
    relay = await startRelay(hostOf(env('PROXY_SNAPPY_URI')));
    before0 = await upstreamCompressed();
    client = new MongoClient(`mongodb://${relay.address}/?compressors=${clientCompressor}`, clientOptions);
    await client.connect();
    const docs = client.db('compressed').collection('docs');
    await docs.deleteMany({});
  });
  after(async () => {
    await client?.close();
    await relay?.close();
  });

  test('operations work, large documents and a cursor included', async () => {
    const docs = client.db('compressed').collection('docs');
    const text = 'the quick brown fox jumps over the lazy dog. '.repeat(2000); // ~90 kB, compressible
    const res = await docs.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: i, text, i })));
    assert.equal(res.insertedCount, 20);
    const back = await docs.find({}, { sort: { _id: 1 }, batchSize: 3 }).toArray();
    assert.equal(back.length, 20);
    assert.ok(back.every((d, i) => d._id === i && d.text === text));
    assert.equal((await docs.updateMany({ i: { $lt: 10 } }, { $set: { low: true } })).modifiedCount, 10);
    assert.equal(await docs.countDocuments({ low: true }), 10);
    assert.equal((await docs.deleteMany({ low: true })).deletedCount, 10);
    const agg = await docs.aggregate([{ $group: { _id: null, n: { $sum: 1 } } }]).toArray();
    assert.deepEqual(agg, [{ _id: null, n: 10 }]);
  });

  test(`the driver's messages to the proxy, and the proxy's replies, are compressed (${clientCompressor})`, (t) => {
    const to = Object.fromEntries(relay.toProxy);
    const from = Object.fromEntries(relay.fromProxy);
    t.diagnostic(`messages by opcode: to the proxy ${JSON.stringify(to)}, from it ${JSON.stringify(from)}`);
    // The operations above are a dozen messages or more each way; the
    // handshakes (hello) are never compressed.
    assert.ok((relay.toProxy.get(OP_COMPRESSED) ?? 0) >= 10, `to the proxy, by opcode: ${JSON.stringify(to)}`);
    assert.ok((relay.fromProxy.get(OP_COMPRESSED) ?? 0) >= 10, `from the proxy, by opcode: ${JSON.stringify(from)}`);
  });

  test('the upstream servers received snappy-compressed messages from the proxy, and answered in kind', async () => {
    const now = await upstreamCompressed();
    const received = (now.received.snappy ?? 0) - (before0.received.snappy ?? 0);
    const sent = (now.sent.snappy ?? 0) - (before0.sent.snappy ?? 0);
    assert.ok(received >= 10, `snappy messages received upstream: ${received} (${JSON.stringify(now)})`);
    assert.ok(sent >= 10, `snappy messages sent upstream: ${sent} (${JSON.stringify(now)})`);
    for (const other of ['zlib', 'zstd']) {
      assert.equal(
        (now.received[other] ?? 0) - (before0.received[other] ?? 0),
        0,
        `the proxy used ${other} upstream, not snappy`,
      );
    }
  });
});
