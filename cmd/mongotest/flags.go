package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mongopool/mongopool/mongotest"
)

// maxMembers is the largest replica set, as mongod (and mongotest) have it.
const maxMembers = 50

// settings are the command's flags, checked.
type settings struct {
	members int    // 0: a standalone (or a sharded cluster)
	setName string // the replica set's name
	// A sharded cluster, when mongoses > 0: mongoses in front of shards,
	// replica sets of shardMembers members each.
	mongoses, shards, shardMembers int
	port                           int // the first server's port; 0: free ports
	controlPort                    int // 0: a free port
	uriFile                        string
	infoFile                       string
	users                          []user

	tls            bool   // -tls, or implied by -tls-cert or -tls-dir
	tlsDir         string // where generated files go; "" for a temporary directory
	tlsCert        string // given certificate and key, rather than generated
	tlsKey         string
	tlsCA          string
	compressors    []string // nil: mongotest's default (all)
	setCompressors bool     // -compressors was given, "none" included
	version        string   // the MongoDB release the servers present themselves as; "" for mongotest's default

	exitOnEOF bool
}

// user is a user of -user, created in the admin database.
type user struct{ name, password string }

const usageText = `Usage: mongotest [flags]

Runs an in-process MongoDB server (mongotest) for test suites of any language:
a standalone, a replica set with -replset N, or a sharded cluster with
-mongos N -shards K, on 127.0.0.1. Prints the connection string as the first
line of standard output once everything is up, then "tls-dir: DIR" when -tls
generated certificates, and "control: URL". Stops, exiting with 0, on SIGINT,
SIGTERM, POST /shutdown to the control endpoint, or the end of standard input
with -exit-on-eof.

Control endpoint (JSON; member, shard and mongos indexes from 0):
  GET  /status                    members, their state, and the primary (of a
                                  sharded cluster: its mongoses and shards)
  GET  /stats[?member=i]          what each server saw (commands, compression)
  POST /stepdown[?next=i|none]    step the primary down and elect another
                                  member (the next one; none: no election)
  POST /elect?member=i            POST /stop?member=i     POST /restart?member=i
  POST /partition?member=i        POST /heal?member=i
  POST /lag?member=i&ms=N         member i reports a lastWrite N ms behind
  POST /failpoint[?member=i]      body: {"configureFailPoint": "failCommand",
                                  "mode": ..., "data": ...} (default: primary)
  POST /shutdown
A sharded cluster's shards take the replica set's controls, and /stats and
/failpoint, with ?shard=k; its mongoses have their own:
  POST /mongos/stop?member=i      POST /mongos/restart?member=i
  POST /mongos/failpoint?member=i GET  /mongos/stats[?member=i]
  GET  /shardof?db=NAME           the shard that holds database NAME

Flags:
`

// parseFlags parses and checks the command's arguments. Its errors name the
// flag at fault; -h prints the usage to stderr and returns flag.ErrHelp.
func parseFlags(args []string, stderr io.Writer) (*settings, error) {
	o := &settings{}
	fs := flag.NewFlagSet("mongotest", flag.ContinueOnError)
	// The flag package prints the whole usage at every error: it is kept
	// quiet, so that a bad flag gets one line that says what is wrong, and
	// the usage is printed for -h only.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.IntVar(&o.members, "replset", 0, "start a replica set of `N` members (1 to 50) rather than a standalone")
	fs.StringVar(&o.setName, "name", "rs0", "the replica set's `name` (with -replset)")
	fs.IntVar(&o.port, "port", 0, "listen on port `P`, the other servers on P+1, P+2, ... (a replica set's members in order; a sharded cluster's mongoses, then each shard's members); default: free ports")
	fs.IntVar(&o.controlPort, "control-port", 0, "the control endpoint's `port` on 127.0.0.1; default: a free port")
	fs.StringVar(&o.uriFile, "uri-file", "", "write the connection string to `file`, atomically, once everything is up")
	fs.StringVar(&o.infoFile, "info-file", "", "write the connection string, the control URL, the hosts (a sharded cluster's mongoses and shards too) and the TLS files as JSON to `file`")
	fs.Func("user", "create the user `name:password` in the admin database (repeatable); the first one goes in the connection string", func(s string) error {
		name, password, ok := strings.Cut(s, ":")
		switch {
		case !ok:
			return errors.New("want name:password")
		case name == "":
			return errors.New("the user name is empty")
		case password == "":
			return errors.New("the password is empty")
		}
		if slices.ContainsFunc(o.users, func(u user) bool { return u.name == name }) {
			return fmt.Errorf("user %q is given twice", name)
		}
		o.users = append(o.users, user{name, password})
		return nil
	})
	fs.BoolVar(&o.tls, "tls", false, "accept TLS connections only, with a CA and certificates generated into -tls-dir (or -tls-cert, -tls-key)")
	fs.StringVar(&o.tlsDir, "tls-dir", "", "the `directory` where -tls writes ca.pem, server.pem and client.pem (created if missing, kept at exit); default: a temporary one, removed at exit")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "the server's certificate `file` (PEM), rather than a generated one; implies -tls")
	fs.StringVar(&o.tlsKey, "tls-key", "", "the `file` of -tls-cert's private key (PEM)")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "a CA `file` (PEM) that clients trust for -tls-cert, given in the connection string as tlsCAFile, and that verifies client certificates")
	compressors := fs.String("compressors", "", "the wire compressors the server accepts, a comma-separated `list` of zstd, zlib, snappy, or none; default: all three (a client asks with its own compressors option)")
	fs.StringVar(&o.version, "mongodb-version", "", "the MongoDB `release` the servers present themselves as, in their handshake (maxWireVersion), in buildInfo and in the commands they have (bulkWrite from 8.0): 4.4, 5.0 to 5.3, 6.0 to 6.3, 7.0 to 7.3, 8.0 on; default: 7.0")
	fs.IntVar(&o.mongoses, "mongos", 0, "start a sharded cluster of `N` mongoses (1 to 50; 1 if only -shards is given), listed in the connection string")
	fs.IntVar(&o.shards, "shards", 0, "the sharded cluster's `K` shards (1 to 50; 1 if only -mongos is given), replica sets named shard0, shard1, ...")
	fs.IntVar(&o.shardMembers, "shard-members", 1, "the members of each shard of the sharded cluster, `M` (1 to 50)")
	fs.BoolVar(&o.exitOnEOF, "exit-on-eof", false, "stop when standard input ends (its pipe's other end closed: the parent died)")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprint(stderr, usageText)
			fs.PrintDefaults()
		}
		return nil, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })

	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: mongotest takes flags only", fs.Arg(0))
	}
	if err := o.checkSharded(given); err != nil {
		return nil, err
	}
	switch {
	case o.members < 0 || o.members > maxMembers:
		return nil, fmt.Errorf("-replset %d: a replica set has 1 to %d members (0, the default, is a standalone)", o.members, maxMembers)
	case given["name"] && o.members == 0:
		return nil, errors.New("-name names a replica set: give -replset N too")
	case o.setName == "":
		return nil, errors.New("-name: the replica set needs a name")
	case strings.ContainsAny(o.setName, "/&?#,= "):
		return nil, fmt.Errorf("-name %q: a replica set name has no '/', '&', '?', '#', ',', '=' or space", o.setName)
	}
	last := o.port + o.servers() - 1
	switch {
	case o.port < 0 || o.port > 65535:
		return nil, fmt.Errorf("-port %d: a port is 1 to 65535 (0, the default, takes free ports)", o.port)
	case o.port > 0 && last > 65535 && o.mongoses > 0:
		return nil, fmt.Errorf("-port %d: the %d mongoses and %d shard members need ports up to %d, beyond 65535", o.port, o.mongoses, o.shards*o.shardMembers, last)
	case o.port > 0 && last > 65535:
		return nil, fmt.Errorf("-port %d: the %d members need ports up to %d, beyond 65535", o.port, o.members, last)
	case o.controlPort < 0 || o.controlPort > 65535:
		return nil, fmt.Errorf("-control-port %d: a port is 1 to 65535 (0, the default, takes a free port)", o.controlPort)
	case o.port > 0 && o.controlPort >= o.port && o.controlPort <= last:
		return nil, fmt.Errorf("-control-port %d is one of the servers' ports (%d to %d)", o.controlPort, o.port, last)
	}
	if o.uriFile != "" && o.uriFile == o.infoFile {
		return nil, errors.New("-uri-file and -info-file name the same file")
	}

	switch {
	case (o.tlsCert == "") != (o.tlsKey == ""):
		return nil, errors.New("-tls-cert and -tls-key go together")
	case o.tlsCA != "" && o.tlsCert == "":
		return nil, errors.New("-tls-ca goes with -tls-cert and -tls-key (a generated CA is in -tls-dir)")
	case o.tlsDir != "" && o.tlsCert != "":
		return nil, errors.New("-tls-dir is where generated certificates go: it does not go with -tls-cert")
	}
	o.tls = o.tls || o.tlsCert != "" || o.tlsDir != ""

	if given["compressors"] {
		o.setCompressors = true
		c, err := parseCompressors(*compressors)
		if err != nil {
			return nil, fmt.Errorf("-compressors %q: %w", *compressors, err)
		}
		o.compressors = c
	}
	if given["mongodb-version"] {
		if _, err := mongotest.WireVersionOf(o.version); err != nil {
			return nil, fmt.Errorf("-mongodb-version: %w", err)
		}
	}
	return o, nil
}

// checkSharded checks the flags of a sharded cluster, given or not, and
// fills in the count left out: -mongos N alone has one shard, -shards K
// alone one mongos.
func (o *settings) checkSharded(given map[string]bool) error {
	if !given["mongos"] && !given["shards"] {
		if given["shard-members"] {
			return errors.New("-shard-members sizes the shards of a sharded cluster: give -mongos N -shards K too")
		}
		return nil
	}
	if !given["mongos"] {
		o.mongoses = 1
	}
	if !given["shards"] {
		o.shards = 1
	}
	switch {
	case o.mongoses < 1 || o.mongoses > maxMembers:
		return fmt.Errorf("-mongos %d: a sharded cluster has 1 to %d mongoses", o.mongoses, maxMembers)
	case o.shards < 1 || o.shards > maxMembers:
		return fmt.Errorf("-shards %d: a sharded cluster has 1 to %d shards", o.shards, maxMembers)
	case o.shardMembers < 1 || o.shardMembers > maxMembers:
		return fmt.Errorf("-shard-members %d: a shard is a replica set of 1 to %d members", o.shardMembers, maxMembers)
	case given["replset"]:
		return errors.New("-replset and -mongos/-shards: a replica set or a sharded cluster, not both (for shards of several members, say -shard-members M)")
	case given["name"]:
		return errors.New("-name names a replica set: the shards of a sharded cluster are named shard0, shard1, ...")
	}
	return nil
}

// servers returns the number of servers o starts: the standalone, the
// replica set's members, or the mongoses and every shard's members.
func (o *settings) servers() int {
	if o.mongoses > 0 {
		return o.mongoses + o.shards*o.shardMembers
	}
	return max(o.members, 1)
}

// parseCompressors parses -compressors: names among zstd, zlib and snappy,
// or "none" alone for no compression at all.
func parseCompressors(s string) ([]string, error) {
	if strings.TrimSpace(s) == "none" {
		return []string{}, nil
	}
	var out []string
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		switch name {
		case "zstd", "zlib", "snappy":
		case "":
			return nil, errors.New("an empty name in the list (for no compression, say none)")
		default:
			return nil, fmt.Errorf("unknown compressor %q (known: zstd, zlib, snappy; or none)", name)
		}
		if slices.Contains(out, name) {
			return nil, fmt.Errorf("%s is given twice", name)
		}
		out = append(out, name)
	}
	return out, nil
}
