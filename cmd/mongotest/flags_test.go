package main

import (
	"bytes"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
)

func TestParseFlagsErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string // in the error
	}{
		{[]string{"-replset", "-1"}, "-replset -1: a replica set has 1 to 50 members"},
		{[]string{"-replset", "51"}, "1 to 50 members"},
		{[]string{"-replset", "three"}, `invalid value "three" for flag -replset`},
		{[]string{"-name", "x"}, "-name names a replica set: give -replset N too"},
		{[]string{"-replset", "3", "-name", ""}, "the replica set needs a name"},
		{[]string{"-replset", "3", "-name", "a/b"}, "a replica set name has no"},
		{[]string{"-port", "70000"}, "-port 70000: a port is 1 to 65535"},
		{[]string{"-port", "-3"}, "-port -3"},
		{[]string{"-port", "65535", "-replset", "2"}, "the 2 members need ports up to 65536"},
		{[]string{"-control-port", "65536"}, "-control-port 65536"},
		{[]string{"-port", "30000", "-replset", "3", "-control-port", "30002"}, "-control-port 30002 is one of the servers' ports (30000 to 30002)"},
		{[]string{"-uri-file", "f", "-info-file", "f"}, "name the same file"},
		{[]string{"-user", "alice"}, `invalid value "alice" for flag -user: want name:password`},
		{[]string{"-user", ":pw"}, "the user name is empty"},
		{[]string{"-user", "alice:"}, "the password is empty"},
		{[]string{"-user", "a:1", "-user", "a:2"}, `user "a" is given twice`},
		{[]string{"-tls-cert", "c.pem"}, "-tls-cert and -tls-key go together"},
		{[]string{"-tls-ca", "ca.pem"}, "-tls-ca goes with -tls-cert"},
		{[]string{"-tls-dir", "d", "-tls-cert", "c", "-tls-key", "k"}, "-tls-dir is where generated certificates go"},
		{[]string{"-compressors", "lz4"}, `unknown compressor "lz4"`},
		{[]string{"-mongodb-version", "8"}, `-mongodb-version: version "8" is not a MongoDB release such as 8.0`},
		{[]string{"-mongodb-version", "4.2"}, "-mongodb-version: MongoDB 4.2 is not a release mongotest presents itself as"},
		{[]string{"-compressors", "zlib,zlib"}, "zlib is given twice"},
		{[]string{"-compressors", ""}, "an empty name"},
		{[]string{"-compressors", "zlib,,zstd"}, "an empty name"},
		{[]string{"-mongos", "0", "-shards", "2"}, "-mongos 0: a sharded cluster has 1 to 50 mongoses"},
		{[]string{"-mongos", "51"}, "-mongos 51"},
		{[]string{"-shards", "-1"}, "-shards -1: a sharded cluster has 1 to 50 shards"},
		{[]string{"-mongos", "1", "-shards", "2", "-shard-members", "0"}, "-shard-members 0: a shard is a replica set of 1 to 50 members"},
		{[]string{"-shard-members", "3"}, "-shard-members sizes the shards of a sharded cluster: give -mongos N -shards K too"},
		{[]string{"-mongos", "2", "-replset", "3"}, "a replica set or a sharded cluster, not both"},
		{[]string{"-shards", "2", "-name", "x"}, "the shards of a sharded cluster are named shard0, shard1"},
		{[]string{"-mongos", "2", "-shards", "2", "-shard-members", "3", "-port", "65530"}, "the 2 mongoses and 6 shard members need ports up to 65537"},
		{[]string{"-mongos", "2", "-shards", "2", "-port", "30000", "-control-port", "30003"}, "-control-port 30003 is one of the servers' ports (30000 to 30003)"},
		{[]string{"-nope"}, "flag provided but not defined: -nope"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		_, err := parseFlags(c.args, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one with %q", c.args, err, c.want)
		}
		// The error is the caller's to print, once: the flag package's own
		// printing (the whole usage at every error) is off.
		if stderr.Len() > 0 {
			t.Errorf("%q: printed %q", c.args, stderr.String())
		}
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{
		"-replset", "3", "-name", "set1", "-port", "30000", "-control-port", "30100",
		"-user", "alice:pa:ss", "-user", "bob:pw", "-tls", "-compressors", "zstd, zlib",
		"-exit-on-eof", "-uri-file", "u", "-info-file", "i", "-mongodb-version", "8.0",
	}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := settings{
		members: 3, setName: "set1", port: 30000, controlPort: 30100,
		uriFile: "u", infoFile: "i",
		users: []user{{"alice", "pa:ss"}, {"bob", "pw"}}, // a password may hold ':'
		tls:   true, compressors: []string{"zstd", "zlib"}, setCompressors: true,
		exitOnEOF: true, version: "8.0",
	}
	if o.members != want.members || o.setName != want.setName || o.port != want.port ||
		o.controlPort != want.controlPort || o.uriFile != want.uriFile || o.infoFile != want.infoFile ||
		!slices.Equal(o.users, want.users) || o.tls != want.tls || !slices.Equal(o.compressors, want.compressors) ||
		o.setCompressors != want.setCompressors || o.exitOnEOF != want.exitOnEOF || o.version != want.version {
		t.Errorf("parsed %+v\nwant %+v", *o, want)
	}

	// The defaults: a standalone on free ports, every compressor.
	o, err = parseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.members != 0 || o.port != 0 || o.controlPort != 0 || o.tls || o.setCompressors || o.setName != "rs0" {
		t.Errorf("defaults: %+v", *o)
	}

	// none: no compression at all, which is not the default.
	o, err = parseFlags([]string{"-compressors", "none"}, &bytes.Buffer{})
	if err != nil || !o.setCompressors || o.compressors == nil || len(o.compressors) != 0 {
		t.Errorf("-compressors none: %+v, %v", o, err)
	}
	// A sharded cluster: a count left out is 1.
	for _, c := range []struct {
		args                           []string
		mongoses, shards, shardMembers int
	}{
		{[]string{"-mongos", "2", "-shards", "3", "-shard-members", "5"}, 2, 3, 5},
		{[]string{"-mongos", "2"}, 2, 1, 1},
		{[]string{"-shards", "4"}, 1, 4, 1},
	} {
		o, err := parseFlags(c.args, &bytes.Buffer{})
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if o.mongoses != c.mongoses || o.shards != c.shards || o.shardMembers != c.shardMembers || o.members != 0 {
			t.Errorf("%q: %d mongoses, %d shards of %d members (members %d); want %d, %d, %d", c.args,
				o.mongoses, o.shards, o.shardMembers, o.members, c.mongoses, c.shards, c.shardMembers)
		}
		if want := c.mongoses + c.shards*c.shardMembers; o.servers() != want {
			t.Errorf("%q: %d servers, want %d", c.args, o.servers(), want)
		}
	}

	// -tls-dir and -tls-cert imply -tls.
	for _, args := range [][]string{{"-tls-dir", "d"}, {"-tls-cert", "c", "-tls-key", "k"}} {
		if o, err := parseFlags(args, &bytes.Buffer{}); err != nil || !o.tls {
			t.Errorf("%q: %+v, %v; want TLS", args, o, err)
		}
	}
}

func TestParseFlagsHelp(t *testing.T) {
	var stderr bytes.Buffer
	_, err := parseFlags([]string{"-h"}, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"Usage: mongotest [flags]", "POST /stepdown", "-replset N", "-uri-file file", "-exit-on-eof",
		"-mongos N", "-shards K", "-shard-members M", "POST /mongos/stop?member=i", "?shard=k"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the usage lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestEscapeURI(t *testing.T) {
	for _, c := range []struct {
		in   string
		path bool
		want string
	}{
		{"alice", false, "alice"},
		{"p@ss:w/rd?#[]%", false, "p%40ss%3Aw%2Frd%3F%23%5B%5D%25"},
		{"/tmp/a b/ca.pem", true, "/tmp/a%20b/ca.pem"},
		{"é", false, "%C3%A9"},
		{"A-Z_a.z~09", false, "A-Z_a.z~09"},
		{"rs0&replicaSet=x", false, "rs0%26replicaSet%3Dx"},
	} {
		if got := escapeURI(c.in, c.path); got != c.want {
			t.Errorf("escapeURI(%q, %v) = %q, want %q", c.in, c.path, got, c.want)
		}
	}
}
