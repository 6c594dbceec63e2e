package mongotest

import (
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ping runs {ping: 1}.
func (s *Server) ping(*request) (bson.D, error) { return bson.D{}, nil }

// buildInfo runs {buildInfo: 1}. The version is the MongoDB release of the
// server's maxWireVersion.
func (s *Server) buildInfo(*request) (bson.D, error) {
	major, minor := versionOf(s.cfg.maxWireVersion)
	return bson.D{
		{Key: "version", Value: versionString(major, minor)},
		{Key: "gitVersion", Value: "mongotest"},
		{Key: "modules", Value: bson.A{}},
		{Key: "sysInfo", Value: "deprecated"},
		{Key: "versionArray", Value: bson.A{int32(major), int32(minor), int32(0), int32(0)}},
		{Key: "bits", Value: int32(64)},
		{Key: "debug", Value: false},
		{Key: "maxBsonObjectSize", Value: int32(MaxBSONObjectSize)},
		{Key: "storageEngines", Value: bson.A{"mongotest"}},
	}, nil
}

// versionString returns the version of a MongoDB release, "7.0.0".
func versionString(major, minor int) string { return fmt.Sprintf("%d.%d.0", major, minor) }

// versionOf returns the MongoDB release that introduced wire version w.
func versionOf(w int32) (major, minor int) {
	switch {
	case w >= 25: // 8.0 and later: one wire version per minor release
		return 8, int(w - 25)
	case w >= 21: // 7.0 to 7.3
		return 7, int(w - 21)
	case w >= 17: // 6.0 to 6.3
		return 6, int(w - 17)
	case w >= 13: // 5.0 to 5.3
		return 5, int(w - 13)
	}
	r := oldReleases[w]
	return r[0], r[1]
}

// oldReleases are the releases of the wire versions 0 to 12.
var oldReleases = [13][2]int{
	{2, 4}, {2, 6}, {2, 6}, {3, 0}, {3, 2}, {3, 4}, {3, 6}, {4, 0}, {4, 2}, {4, 4}, {4, 7}, {4, 8}, {4, 9},
}

// systemDatabases are the databases a mongod has from its start, with
// the size on disk an idle mongod 7.0 standalone reports for them, as
// mongosh's show dbs prints them (admin 40 KiB, config 12 KiB, local
// 40 KiB): admin holds system.version, config system.sessions, local
// startup_log. The store does not hold those collections: their sizes are
// nominal, and the data written to these databases adds to them.
var systemDatabases = map[string]int64{"admin": 40 << 10, "config": 12 << 10, "local": 40 << 10}

// listDatabases runs {listDatabases: 1, nameOnly, filter,
// authorizedDatabases} on admin. Databases exist while they hold a
// collection, but the system databases of a mongod (systemDatabases),
// which always do. Every user may do anything, so every database is
// authorized: authorizedDatabases changes nothing.
func (s *Server) listDatabases(req *request) (bson.D, error) {
	if req.db != "admin" {
		return nil, errorf(codeUnauthorized, "listDatabases may only be run against the admin database.")
	}
	if err := checkFields(req, "nameOnly", "filter", "authorizedDatabases"); err != nil {
		return nil, err
	}
	nameOnly, err := boolArg(req.body, "nameOnly", false)
	if err != nil {
		return nil, err
	}
	if v, err := req.body.LookupErr("authorizedDatabases"); err == nil && v.Type != bson.TypeBoolean {
		return nil, errorf(codeTypeMismatch, "BSON field 'listDatabases.authorizedDatabases' is the wrong type '%s', expected type 'bool'", typeName(v.Type))
	}
	f, err := filterArg(req.body, "filter")
	if err != nil {
		return nil, err
	}
	infos := s.store.databases()
	if s.role != roleMongos {
		// A mongos lists admin and config with the shards that hold
		// them, which the test server's mongos has not: it lists the
		// databases of its store only.
		for name, size := range systemDatabases {
			i := slices.IndexFunc(infos, func(d dbInfo) bool { return d.name == name })
			if i < 0 {
				infos = append(infos, dbInfo{name: name})
				i = len(infos) - 1
			}
			infos[i].size += size
			infos[i].empty = false
		}
		slices.SortFunc(infos, func(a, b dbInfo) int { return strings.Compare(a.name, b.name) })
	}
	dbs := bson.A{}
	var total int64
	for _, info := range infos {
		entry := bson.D{{Key: "name", Value: info.name}}
		if !nameOnly {
			entry = append(entry,
				bson.E{Key: "sizeOnDisk", Value: info.size},
				bson.E{Key: "empty", Value: info.empty})
		}
		raw := mustMarshal(entry)
		if !f.match(raw) {
			continue
		}
		dbs = append(dbs, raw)
		total += info.size
	}
	if err := f.err(); err != nil {
		return nil, err
	}
	d := bson.D{{Key: "databases", Value: dbs}}
	if !nameOnly {
		d = append(d,
			bson.E{Key: "totalSize", Value: total},
			bson.E{Key: "totalSizeMb", Value: total >> 20})
	}
	return d, nil
}

// listCollections runs {listCollections: 1, filter, nameOnly}; the reply
// is a cursor with a single batch.
func (s *Server) listCollections(req *request) (bson.D, error) {
	nameOnly, err := boolArg(req.body, "nameOnly", false)
	if err != nil {
		return nil, err
	}
	f, err := filterArg(req.body, "filter")
	if err != nil {
		return nil, err
	}
	var batch []bson.Raw
	for _, name := range s.store.collections(req.db) {
		entry := bson.D{{Key: "name", Value: name}, {Key: "type", Value: "collection"}}
		if !nameOnly {
			entry = append(entry,
				bson.E{Key: "options", Value: bson.D{}},
				bson.E{Key: "info", Value: bson.D{{Key: "readOnly", Value: false}}})
		}
		if raw := mustMarshal(entry); f.match(raw) {
			batch = append(batch, raw)
		}
	}
	if err := f.err(); err != nil {
		return nil, err
	}
	return cursorReply("firstBatch", batch, 0, req.db+".$cmd.listCollections"), nil
}
