// A change stream through the proxy: collection.watch(). Either it works
// (the proxy passes the aggregate and its awaitData getMores on) and an
// insert comes out of it, or the upstream server refuses it, and then the
// error must be the server's, clear (it names $changeStream), not a network
// error, and the client must go on: its pool to the proxy not cleared, its
// next operations answered. mongotest does not implement change streams,
// so the second is what happens in front of it.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { clientOptions, env, mongodb, recordCommands, TIMEOUT_MS, withTimeout } from './proxytest.mjs';

const { MongoClient, MongoServerError, MongoNetworkError } = mongodb;

function changeStreamTests(persona, uriVar, collection) {
  describe(`a change stream through the proxy (${persona})`, () => {
    let client;
    let events;
    let cleared = 0;
    before(async () => {
      client = new MongoClient(env(uriVar), clientOptions);
      events = recordCommands(client);
      client.on('connectionPoolCleared', () => cleared++);
      await client.connect();
    });
    after(async () => {
      await client?.close();
    });

    test('watch() works, or fails with a clear error and the connection stays usable', async (t) => {
      const coll = client.db('streams').collection(collection);
      await coll.deleteMany({});
      await coll.insertOne({ before: true });
      const stream = coll.watch([], { maxAwaitTimeMS: 200 });
      let outcome;
      try {
        // The first tryNext runs the aggregate: the stream is open, or fails.
        await withTimeout(stream.tryNext(), TIMEOUT_MS, 'opening the change stream');
        await coll.insertOne({ x: 1 });
        const change = await withTimeout(stream.next(), TIMEOUT_MS, 'the change of the insert');
        assert.equal(change.operationType, 'insert');
        assert.equal(change.fullDocument.x, 1);
        outcome = 'works';
      } catch (err) {
        if (err instanceof assert.AssertionError) throw err;
        assert.ok(!(err instanceof MongoNetworkError), `a network error: ${err}`);
        assert.ok(err instanceof MongoServerError, `not the server's error: ${err}`);
        assert.match(err.message, /\$changeStream/, 'the error names what is not supported');
        assert.equal(typeof err.code, 'number');
        assert.notEqual(err.code, 6, 'HostUnreachable: the proxy lost the server');
        const failed = events.filter((e) => e.kind === 'failed' && e.name === 'aggregate');
        assert.equal(failed.length, 1, 'the driver does not retry a refused change stream');
        outcome = `refused: ${err.code} ${err.message}`;
      } finally {
        await stream.close();
      }
      // The client goes on, on the same pool.
      await coll.insertOne({ after: true });
      assert.equal(await coll.countDocuments({ after: true }), 1);
      assert.equal((await client.db('admin').command({ ping: 1 })).ok, 1);
      assert.equal(cleared, 0, 'the pool to the proxy was cleared');
      t.diagnostic(`change stream through the proxy (${persona}): ${outcome}`);
    });
  });
}

changeStreamTests('mongos', 'PROXY_URI', 'watched');
changeStreamTests('load balancer', 'PROXY_LB_URI', 'watchedLB');
