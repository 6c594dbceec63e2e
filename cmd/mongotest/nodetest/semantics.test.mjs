// mongod's exact semantics where a test suite may meet them, through the
// official Node.js driver: NaN in range queries, $regex matched as PCRE,
// and write concerns on a replica set and a standalone. Each test cites
// what it follows: the manual, or mongod's source
// (https://github.com/mongodb/mongo, src/mongo/...).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BSONRegExp, Decimal128, MongoClient, MongoServerError, MongoWriteConcernError } from 'mongodb';
import { TIMEOUT_MS, startMongotest, stopChecked } from './mongotest.mjs';

const clientOptions = { serverSelectionTimeoutMS: 10_000 };

// ids returns the sorted _ids of the documents of coll that filter
// matches.
async function ids(coll, filter) {
  return (await coll.find(filter, { projection: { _id: 1 }, sort: { _id: 1 } }).toArray()).map((d) => d._id);
}

describe('a standalone: NaN, regular expressions, a write concern it cannot satisfy', { timeout: 4 * TIMEOUT_MS }, () => {
  let m;
  let client;
  before(async () => {
    m = await startMongotest();
    client = new MongoClient(m.uri, clientOptions);
    await client.connect();
  });
  after(async () => {
    await client?.close();
    await stopChecked(m);
  });

  // NaN sorts below every number (the "Comparison/Sort Order" page,
  // https://www.mongodb.com/docs/manual/reference/bson-type-comparison-order/,
  // puts all numbers in one class, and mongod's compareDoubles,
  // src/mongo/base/compare_numbers.h, orders NaN first), but a range
  // predicate does not match it against a number: the matcher's
  // ComparisonMatchExpressionBase::compare
  // (src/mongo/db/matcher/expression_leaf.cpp) says "NaN is equal to NaN
  // but otherwise always compares to false", for a double's NaN and a
  // decimal's alike. So {$lt: 0} does not match NaN, {$gte: NaN} and
  // {$lte: NaN} match NaN only, {$gt: NaN} and {$lt: NaN} nothing.
  test('NaN in range queries', async () => {
    const values = client.db('semantics').collection('nan');
    await values.insertMany([
      { _id: 1, v: NaN },
      { _id: 2, v: -Infinity },
      { _id: 3, v: -1 },
      { _id: 4, v: 0 },
      { _id: 5, v: 2.5 },
      { _id: 6, v: Infinity },
      { _id: 7, v: Decimal128.fromString('NaN') },
      { _id: 8, v: 'a string' },
      { _id: 9, v: null },
    ]);
    assert.deepEqual(await ids(values, { v: { $lt: 0 } }), [2, 3]);
    assert.deepEqual(await ids(values, { v: { $lte: 0 } }), [2, 3, 4]);
    assert.deepEqual(await ids(values, { v: { $gte: -Infinity } }), [2, 3, 4, 5, 6]);
    assert.deepEqual(await ids(values, { v: { $gte: NaN } }), [1, 7]);
    assert.deepEqual(await ids(values, { v: { $lte: NaN } }), [1, 7]);
    assert.deepEqual(await ids(values, { v: { $gt: NaN } }), []);
    assert.deepEqual(await ids(values, { v: { $lt: NaN } }), []);
    assert.deepEqual(await ids(values, { v: NaN }), [1, 7]);
    // $ne is the negation of equality: everything but the NaNs.
    assert.deepEqual(await ids(values, { v: { $ne: NaN } }), [2, 3, 4, 5, 6, 8, 9]);
    // The same predicates count, and delete, the same documents.
    assert.equal(await values.countDocuments({ v: { $lt: 0 } }), 2);
    // In a sort, NaN comes first among the numbers (null sorts before
    // numbers, strings after).
    const sorted = await values.find({}, { sort: { v: 1, _id: 1 } }).toArray();
    assert.deepEqual(
      sorted.map((d) => d._id),
      [9, 1, 7, 2, 3, 4, 5, 6, 8],
    );
    const deleted = await values.deleteMany({ v: { $lte: 0 } });
    assert.equal(deleted.deletedCount, 3);
    assert.deepEqual(await ids(values, { v: { $type: 'number' } }), [1, 5, 6, 7]);
  });

  // mongod matches $regex with PCRE (the $regex page,
  // https://www.mongodb.com/docs/manual/reference/operator/query/regex/;
  // PCRE2 since 6.1), not with JavaScript's engine. PCRE2's own manual
  // (https://www.pcre.org/current/doc/html/pcre2pattern.html) gives each
  // of these: "Circumflex and dollar": without the m option, $ matches at
  // the end of the subject and also before a newline that ends it;
  // "Generic character types": the default \s characters are HT, LF, VT
  // (added in PCRE 8.34, after Perl 5.18), FF, CR and space, and no
  // character above 127 matches \s without PCRE2_UCP, which mongod does not
  // set (SERVER-23881); "Lookahead assertions" and "Lookbehind assertions".
  test('$regex is PCRE: $ before a final newline, \\s and VT, lookarounds', async () => {
    const texts = client.db('semantics').collection('regex');
    await texts.insertMany([
      { _id: 1, s: 'abc' },
      { _id: 2, s: 'abc\n' },
      { _id: 3, s: 'abc\n\n' },
      { _id: 4, s: 'xabc' },
      { _id: 5, s: '\v' },
      { _id: 6, s: '\u00a0' }, // NO-BREAK SPACE: not ASCII
      { _id: 7, s: 'foobar' },
      { _id: 8, s: 'foobaz' },
    ]);
    // $ matches at the end and before one final newline, not two.
    assert.deepEqual(await ids(texts, { s: /abc$/ }), [1, 2, 4]);
    assert.deepEqual(await ids(texts, { s: { $regex: '^abc$' } }), [1, 2]);
    // With m, $ matches before every newline.
    assert.deepEqual(await ids(texts, { s: { $regex: '^abc$', $options: 'm' } }), [1, 2, 3]);
    // \s takes the vertical tab, ASCII only.
    assert.deepEqual(await ids(texts, { s: /^\s$/ }), [5]);
    // Lookahead and lookbehind.
    assert.deepEqual(await ids(texts, { s: /^foo(?=bar)/ }), [7]);
    assert.deepEqual(await ids(texts, { s: /^foo(?!bar)/ }), [8]);
    assert.deepEqual(await ids(texts, { s: /(?<=foo)baz/ }), [8]);
    // A BSON regular expression with PCRE's own syntax, which JavaScript
    // would not compile: a possessive quantifier.
    assert.deepEqual(await ids(texts, { s: new BSONRegExp('^ab++c$') }), [1, 2]);
  });

  // A standalone refuses w > 1 before the write: validateWriteConcern
  // (src/mongo/db/write_concern.cpp) returns BadValue, "cannot use 'w' > 1
  // when a host is not replicated", and the command fails; nothing is
  // written.
  test('w: 2 on a standalone: BadValue (2), nothing written', async () => {
    const coll = client.db('semantics').collection('wc');
    const err = await coll.insertOne({ x: 1 }, { writeConcern: { w: 2 } }).then(
      () => assert.fail('a standalone took w: 2'),
      (e) => e,
    );
    assert.ok(err instanceof MongoServerError, `${err}`);
    assert.equal(err.code, 2);
    assert.equal(err.codeName, 'BadValue');
    assert.match(err.message, /cannot use 'w' > 1 when a host is not replicated/);
    assert.equal(await coll.countDocuments(), 0);
  });
});

describe('write concerns on a replica set of three', { timeout: 4 * TIMEOUT_MS }, () => {
  let m;
  let client;
  before(async () => {
    m = await startMongotest(['-replset', '3']);
    client = new MongoClient(m.uri, clientOptions);
    await client.connect();
  });
  after(async () => {
    await client?.close();
    await stopChecked(m);
  });

  // A replica set applies the write, then checks the write concern
  // against its configuration (ReplSetConfig::checkIfWriteConcernCanBeSatisfied,
  // src/mongo/db/repl/repl_set_config.cpp): more members than bear data
  // is UnsatisfiableWriteConcern (100), "Not enough data-bearing nodes",
  // reported as the reply's writeConcernError of a command that succeeded
  // (ok: 1, n: 1): the write stays. (The w values are those of the
  // manual's https://www.mongodb.com/docs/manual/reference/write-concern/.)
  test('w: 5 on three members: writeConcernError 100, the write applied', async () => {
    const coll = client.db('semantics').collection('wc');
    const err = await coll.insertOne({ _id: 'five' }, { writeConcern: { w: 5 } }).then(
      () => assert.fail('w: 5 was satisfied by three members'),
      (e) => e,
    );
    assert.ok(err instanceof MongoWriteConcernError, `${err}`);
    assert.equal(err.code, 100);
    assert.equal(err.codeName, 'UnsatisfiableWriteConcern');
    assert.equal(err.result.n, 1, 'the reply counts the write');
    assert.deepEqual(await coll.findOne({ _id: 'five' }), { _id: 'five' });
  });

  // A w mode that the configuration's settings.getLastErrorModes lacks is
  // UnknownReplWriteConcern (79), "No write concern mode named ... found in
  // replica set configuration" (ReplSetConfig::findCustomWriteMode, through
  // checkIfWriteConcernCanBeSatisfied), again after the write.
  test('w: "nosuchtag": writeConcernError 79, the write applied', async () => {
    const coll = client.db('semantics').collection('wc');
    const err = await coll.updateOne({ _id: 'tagged' }, { $set: { n: 1 } }, { upsert: true, writeConcern: { w: 'nosuchtag' } }).then(
      () => assert.fail('an unknown write concern mode was satisfied'),
      (e) => e,
    );
    assert.ok(err instanceof MongoWriteConcernError, `${err}`);
    assert.equal(err.code, 79);
    assert.equal(err.codeName, 'UnknownReplWriteConcern');
    assert.match(err.message, /No write concern mode named 'nosuchtag' found in replica set configuration/);
    assert.deepEqual(await coll.findOne({ _id: 'tagged' }), { _id: 'tagged', n: 1 });
  });

  // What three members satisfy, they satisfy: w: 3 and "majority" are
  // acknowledged once the write is on the members they count.
  test('w: 3 and w: "majority" on three members: acknowledged', async () => {
    const coll = client.db('semantics').collection('wc');
    for (const w of [3, 'majority']) {
      const res = await coll.insertOne({ w }, { writeConcern: { w, wtimeoutMS: 5_000 } });
      assert.equal(res.acknowledged, true);
    }
    assert.equal(await coll.countDocuments({ w: { $in: [3, 'majority'] } }), 2);
  });
});
