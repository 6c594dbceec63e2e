// Transactions through the proxy with session.withTransaction: a commit, an
// abort by a throw in the callback, and a write conflict between two
// sessions, in front of a replica set (through one proxy, and through two
// in one seed list) and in front of a sharded cluster (where the proxy pins
// each transaction to the upstream mongos of its first command).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { clientOptions, control, env, hostOf, mongodb, recordCommands, TIMEOUT_MS, withTimeout } from './proxytest.mjs';

const { MongoClient, MongoServerError } = mongodb;

// Every withTransaction of these tests ends well within a test's deadline:
// the driver's own limit, 120 seconds of retries, is beyond it.
function transaction(session, fn) {
  return withTimeout(session.withTransaction(fn), TIMEOUT_MS, 'withTransaction');
}

// mongosCounts resolves to the counts of the commands names on each mongos
// of the sharded cluster.
async function mongosCounts(names) {
  const { status, json } = await control(env('MONGOTEST_SHARDED_CONTROL'), '/mongos/stats', { method: 'GET' });
  assert.equal(status, 200, JSON.stringify(json));
  return json.mongoses.map((m) => Object.fromEntries(names.map((n) => [n, m.commands?.[n] ?? 0])));
}

// transactionTests are the tests of the transactions through the proxy (or
// proxies) of the URI uri() returns, with upstream in front.
function transactionTests(upstream, uri) {
  describe(`transactions through the proxy (${upstream})`, () => {
    let client;
    let events;
    let db;
    before(async () => {
      client = new MongoClient(uri(), clientOptions);
      events = recordCommands(client);
      await client.connect();
      db = client.db('txn');
      // The collections exist before the transactions: the tests are about
      // their statements, not about creating collections inside them.
      for (const name of ['accounts', 'ledger', 'counters']) {
        await db.collection(name).deleteMany({});
      }
    });
    after(async () => {
      await client?.close();
    });

    test('withTransaction commits: the writes together, unseen outside before the commit', async () => {
      const accounts = db.collection('accounts');
      const ledger = db.collection('ledger');
      await accounts.insertMany([
        { _id: 'alice', balance: 100 },
        { _id: 'bob', balance: 0 },
      ]);
      const session = client.startSession();
      const from = events.length;
      let seenOutside;
      try {
        const result = await transaction(session, async (s) => {
          await accounts.updateOne({ _id: 'alice' }, { $inc: { balance: -30 } }, { session: s });
          await accounts.updateOne({ _id: 'bob' }, { $inc: { balance: 30 } }, { session: s });
          await ledger.insertOne({ from: 'alice', to: 'bob', amount: 30 }, { session: s });
          assert.equal((await accounts.findOne({ _id: 'bob' }, { session: s })).balance, 30, 'seen inside');
          seenOutside = {
            bob: (await accounts.findOne({ _id: 'bob' })).balance,
            ledger: await ledger.countDocuments(),
          };
          return 'moved';
        });
        assert.equal(result, 'moved');
      } finally {
        await session.endSession();
      }
      assert.deepEqual(seenOutside, { bob: 0, ledger: 0 });
      assert.deepEqual(await accounts.find({}, { sort: { _id: 1 } }).toArray(), [
        { _id: 'alice', balance: 70 },
        { _id: 'bob', balance: 30 },
      ]);
      assert.equal(await ledger.countDocuments({ from: 'alice' }), 1);
      const txn = events.slice(from).filter((e) => e.kind === 'started' && e.command.txnNumber !== undefined);
      assert.equal(txn[0].command.startTransaction, true);
      assert.equal(txn.at(-1).name, 'commitTransaction');
      assert.equal(events.slice(from).filter((e) => e.kind === 'failed').length, 0);
    });

    test('a callback that throws aborts: withTransaction rejects with its error, nothing is written', async () => {
      const ledger = db.collection('ledger');
      const session = client.startSession();
      const from = events.length;
      let attempts = 0;
      try {
        const err = await transaction(session, async (s) => {
          attempts++;
          await ledger.insertOne({ from: 'carol', amount: 5 }, { session: s });
          await ledger.insertOne({ from: 'carol', amount: 6 }, { session: s });
          throw new Error('rejected');
        }).then(
          () => assert.fail('withTransaction resolved though its callback threw'),
          (e) => e,
        );
        assert.equal(err.message, 'rejected');
      } finally {
        await session.endSession();
      }
      assert.equal(attempts, 1);
      assert.equal(await ledger.countDocuments({ from: 'carol' }), 0);
      const ends = events
        .slice(from)
        .filter((e) => e.kind === 'succeeded' && (e.name === 'abortTransaction' || e.name === 'commitTransaction'))
        .map((e) => e.name);
      assert.deepEqual(ends, ['abortTransaction']);
    });

    test('two sessions write one document: WriteConflict (112), TransientTransactionError; withTransaction retries', async () => {
      const counters = db.collection('counters');
      await counters.insertOne({ _id: 'hits', n: 0 });
      const a = client.startSession();
      const b = client.startSession();
      try {
        a.startTransaction();
        await counters.updateOne({ _id: 'hits' }, { $inc: { n: 1 } }, { session: a });
        b.startTransaction();
        const err = await counters.updateOne({ _id: 'hits' }, { $inc: { n: 10 } }, { session: b }).then(
          () => assert.fail('two transactions wrote one document'),
          (e) => e,
        );
        assert.ok(err instanceof MongoServerError, `${err}`);
        assert.equal(err.code, 112);
        assert.equal(err.codeName, 'WriteConflict');
        assert.ok(err.hasErrorLabel('TransientTransactionError'), `labels: ${err.errorLabels}`);
        await b.abortTransaction();
        await a.commitTransaction();
        assert.equal((await counters.findOne({ _id: 'hits' })).n, 1);

        // Again, with withTransaction for b: its first attempt conflicts,
        // a commits, and the retry goes through.
        a.startTransaction();
        await counters.updateOne({ _id: 'hits' }, { $inc: { n: 1 } }, { session: a });
        let attempts = 0;
        await transaction(b, async (s) => {
          attempts++;
          try {
            await counters.updateOne({ _id: 'hits' }, { $inc: { n: 10 } }, { session: s });
          } catch (e) {
            if (attempts === 1 && e.code === 112) await a.commitTransaction();
            throw e;
          }
        });
        assert.equal(attempts, 2);
        assert.equal((await counters.findOne({ _id: 'hits' })).n, 12);
      } finally {
        await a.endSession();
        await b.endSession();
      }
    });

    if (upstream.includes('sharded cluster')) {
      test('the statements of a transaction all go to one upstream mongos', async () => {
        const names = ['update', 'commitTransaction'];
        const accounts = db.collection('accounts');
        for (let round = 0; round < 3; round++) {
          const before = await mongosCounts(names);
          const session = client.startSession();
          try {
            await transaction(session, async (s) => {
              for (let i = 0; i < 5; i++) {
                await accounts.updateOne({ _id: 'alice' }, { $inc: { balance: 1 } }, { session: s });
              }
            });
          } finally {
            await session.endSession();
          }
          const delta = (await mongosCounts(names)).map((m, i) => ({
            update: m.update - before[i].update,
            commitTransaction: m.commitTransaction - before[i].commitTransaction,
          }));
          const pinned = delta.findIndex((d) => d.commitTransaction > 0);
          assert.ok(pinned >= 0, `no mongos received the commit: ${JSON.stringify(delta)}`);
          assert.deepEqual(delta[pinned], { update: 5, commitTransaction: 1 }, JSON.stringify(delta));
          delta.forEach((d, i) => {
            if (i !== pinned) assert.deepEqual(d, { update: 0, commitTransaction: 0 }, JSON.stringify(delta));
          });
        }
        assert.equal((await accounts.findOne({ _id: 'alice' })).balance, 70 + 15);
      });
    }
  });
}

transactionTests('replica set upstream', () => env('PROXY_URI'));
transactionTests(
  'two proxies in one seed list, replica set upstream',
  () => `mongodb://${hostOf(env('PROXY_URI'))},${hostOf(env('PROXY2_URI'))}/`,
);
transactionTests('sharded cluster upstream', () => env('PROXY_SHARDED_URI'));

describe('transactions through two proxies, one on each', () => {
  let one;
  let two;
  before(async () => {
    one = new MongoClient(env('PROXY_URI'), clientOptions);
    two = new MongoClient(env('PROXY2_URI'), clientOptions);
    await one.connect();
    await two.connect();
    await one.db('txn2').collection('stock').deleteMany({});
  });
  after(async () => {
    await one?.close();
    await two?.close();
  });

  test('they conflict on one document upstream; once the first commits, the retry of the second commits', async () => {
    const stockA = one.db('txn2').collection('stock');
    const stockB = two.db('txn2').collection('stock');
    await stockA.insertOne({ _id: 'pen', qty: 10 });
    const a = one.startSession();
    const b = two.startSession();
    try {
      a.startTransaction();
      await stockA.updateOne({ _id: 'pen' }, { $inc: { qty: -1 } }, { session: a });
      let attempts = 0;
      await transaction(b, async (s) => {
        attempts++;
        try {
          await stockB.updateOne({ _id: 'pen' }, { $inc: { qty: -2 } }, { session: s });
        } catch (e) {
          if (attempts === 1) {
            assert.equal(e.code, 112, `${e}`);
            assert.ok(e.hasErrorLabel('TransientTransactionError'));
            await a.commitTransaction();
          }
          throw e;
        }
      });
      assert.equal(attempts, 2);
    } finally {
      await a.endSession();
      await b.endSession();
    }
    assert.equal((await stockA.findOne({ _id: 'pen' })).qty, 7);
    assert.equal((await stockB.findOne({ _id: 'pen' })).qty, 7);
  });
});
