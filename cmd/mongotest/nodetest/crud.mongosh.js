// Run by mongosh.test.mjs with `mongosh URI --quiet --file crud.mongosh.js`:
// basic CRUD through the shell's own API, then one line of JSON with the
// results, which the test checks.

const people = db.getSiblingDB('shelltest').people;
people.drop();
const inserted = people.insertMany([
  { name: 'ada', born: 1815 },
  { name: 'alan', born: 1912 },
  { name: 'grace', born: 1906 },
]);
const updated = people.updateOne({ name: 'alan' }, { $set: { field: 'computing' } });
const deleted = people.deleteOne({ name: 'grace' });
const docs = people.find({}, { _id: 0 }).sort({ born: 1 }).toArray();

print(
  JSON.stringify({
    inserted: Object.keys(inserted.insertedIds).length,
    matched: updated.matchedCount,
    modified: updated.modifiedCount,
    deleted: deleted.deletedCount,
    count: people.countDocuments(),
    docs,
    ping: db.runCommand({ ping: 1 }).ok,
  }),
);
