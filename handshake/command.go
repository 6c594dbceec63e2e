// Package handshake builds the initial handshake command of a MongoDB
// connection and checks the server's reply to it.
//
// It follows the MongoDB Handshake specification (client metadata, its
// 512-byte limit and truncation order, FaaS and container detection), the
// load-balancer specification (loadBalanced:true, a serviceId in the reply),
// the wire-version compatibility rules of Server Discovery and Monitoring and
// the compressor negotiation of OP_COMPRESSED.
//
// The package does no I/O on a connection: Command gives the document to send
// (it carries "$db":"admin") and Parse checks what came back. A connection
// runs them as
//
//	cmd, err := handshake.Command(opts)
//	reply, err := conn.RoundTrip(ctx, cmd)
//	desc, err := handshake.Parse(reply, opts)
//
// A server that refuses the hello (ok not 1) yields a *wire.CommandError:
// from RoundTrip, when conn is a wire.RoundTripper that checks ok, or wrapped
// by Parse otherwise ("handshake: hello failed: ...").
//
// The handshake command must not be compressed (OP_COMPRESSED).
package handshake

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// DriverName is the client.driver.name this package reports.
const DriverName = "mongopool"

// DriverVersion is the client.driver.version this package reports.
const DriverVersion = "0.1.0"

// MinWireVersion and MaxWireVersion are the range of wire versions mongopool
// supports: MongoDB 4.2 (wire version 8) up to MongoDB 8.0 (wire version 25).
const (
	MinWireVersion = 8
	MaxWireVersion = 25

	// minMongoDBVersion is the MongoDB release of MinWireVersion, named in
	// the compatibility error the SDAM specification describes.
	minMongoDBVersion = "4.2"
)

// MaxAppNameBytes is the limit on client.application.name, in bytes.
const MaxAppNameBytes = 128

// MaxClientMetadataBytes is the limit on the client metadata document,
// counted with all its BSON overhead.
const MaxClientMetadataBytes = 512

// Compressor names that may appear in a handshake. Others are dropped from
// Options.Compressors (the connection string specification warns about
// unknown compressors; they are never sent to the server).
const (
	CompressorSnappy = "snappy"
	CompressorZlib   = "zlib"
	CompressorZstd   = "zstd"
)

// Options says what to put into the handshake and what to expect back.
type Options struct {
	// AppName is client.application.name; empty for none. At most 128 bytes.
	AppName string

	// Compressors lists the compressors the client is willing to use, in its
	// order of preference. Unknown names and repeats are dropped.
	Compressors []string

	// LoadBalanced makes the handshake a hello with loadBalanced:true, and
	// Parse then requires a serviceId in the reply.
	LoadBalanced bool

	// SaslSupportedMechs is "<source>.<username>" to ask the server for the
	// user's SASL mechanisms (when the credential names no mechanism); empty
	// for none.
	SaslSupportedMechs string

	// SpeculativeAuthenticate is the first authentication command to send
	// along with the handshake (see the auth package); nil for none.
	SpeculativeAuthenticate bson.Raw

	// DriverInfo lists libraries that wrap mongopool. Each is appended to
	// client.driver.name, client.driver.version and client.platform with a
	// "|" delimiter; repeats of an equal DriverInfo are appended once.
	DriverInfo []DriverInfo

	// Address is the server's "host:port", used only in error messages.
	Address string

	// Env is where the FaaS, container and OS facts come from. Its nil
	// fields read the real process environment and file system.
	Env Environment
}

// DriverInfo describes a library that wraps mongopool. An empty field is
// treated as unset. No field may contain "|".
type DriverInfo struct {
	Name     string
	Version  string
	Platform string
}

// Environment gives the facts the client metadata is built from. Tests set
// it to make the metadata independent of the machine they run on.
type Environment struct {
	// Getenv returns an environment variable, "" when unset. Default
	// os.Getenv.
	Getenv func(key string) string
	// FileExists reports whether a file exists. Default: os.Stat succeeds.
	FileExists func(path string) bool
	// ReadFile reads a whole file (used for /etc/os-release). Default
	// os.ReadFile.
	ReadFile func(path string) ([]byte, error)
}

// Command returns the initial handshake command, with "$db":"admin".
//
// The command is "hello" in load-balanced mode and the legacy hello
// ("isMaster") otherwise, as the handshake specification requires when no
// server API version is declared; both carry helloOk:true, backpressure:"2",
// the client metadata and the compression list (empty when no compressor is
// configured).
//
// Command fails when AppName is longer than 128 bytes, when a DriverInfo
// field contains "|", or when the client metadata cannot be brought under
// 512 bytes by the specification's truncation steps.
func Command(opts Options) (bson.Raw, error) {
	if len(opts.AppName) > MaxAppNameBytes {
		return nil, fmt.Errorf("handshake: appName is %d bytes long, more than the limit of %d bytes", len(opts.AppName), MaxAppNameBytes)
	}
	if !utf8.ValidString(opts.AppName) {
		return nil, errors.New("handshake: appName is not valid UTF-8")
	}
	md, err := collectMetadata(opts)
	if err != nil {
		return nil, err
	}
	client, err := md.encode()
	if err != nil {
		return nil, err
	}

	var cmd bson.D
	if opts.LoadBalanced {
		cmd = append(cmd, bson.E{Key: "hello", Value: int32(1)})
	} else {
		cmd = append(cmd, bson.E{Key: "isMaster", Value: int32(1)})
	}
	cmd = append(cmd,
		bson.E{Key: "helloOk", Value: true},
		bson.E{Key: "backpressure", Value: "2"},
	)
	if opts.LoadBalanced {
		cmd = append(cmd, bson.E{Key: "loadBalanced", Value: true})
	}
	cmd = append(cmd,
		bson.E{Key: "client", Value: client},
		bson.E{Key: "compression", Value: knownCompressors(opts.Compressors)},
	)
	if opts.SaslSupportedMechs != "" {
		cmd = append(cmd, bson.E{Key: "saslSupportedMechs", Value: opts.SaslSupportedMechs})
	}
	if len(opts.SpeculativeAuthenticate) > 0 {
		if err := opts.SpeculativeAuthenticate.Validate(); err != nil {
			return nil, fmt.Errorf("handshake: speculativeAuthenticate is not a valid BSON document: %w", err)
		}
		cmd = append(cmd, bson.E{Key: "speculativeAuthenticate", Value: opts.SpeculativeAuthenticate})
	}
	cmd = append(cmd, bson.E{Key: "$db", Value: "admin"})

	b, err := bson.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("handshake: encoding the hello command: %w", err)
	}
	return bson.Raw(b), nil
}

// knownCompressors keeps the known compressor names of list, in order and
// without repeats. It never returns nil, so that an empty list is sent as an
// empty array, as OP_COMPRESSED recommends.
func knownCompressors(list []string) bson.A {
	out := bson.A{}
	seen := map[string]bool{}
	for _, c := range list {
		switch c {
		case CompressorSnappy, CompressorZlib, CompressorZstd:
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// appendDriverInfo appends the wrapping libraries' names, versions and
// platforms to the driver's own, per "Supporting Wrapping Libraries".
func appendDriverInfo(md *metadata, infos []DriverInfo) error {
	var seen []DriverInfo
	for _, di := range infos {
		for _, s := range []string{di.Name, di.Version, di.Platform} {
			if strings.Contains(s, "|") {
				return fmt.Errorf("handshake: driver info %q contains the metadata delimiter \"|\"", s)
			}
		}
		if di == (DriverInfo{}) || slices.Contains(seen, di) {
			continue
		}
		seen = append(seen, di)
		if di.Name != "" {
			md.driverName += "|" + di.Name
		}
		if di.Version != "" {
			md.driverVersion += "|" + di.Version
		}
		if di.Platform != "" {
			md.platform += "|" + di.Platform
		}
	}
	return nil
}

// errMetadataTooLarge is returned when even the truncated metadata exceeds
// the limit (only possible with very long DriverInfo values).
var errMetadataTooLarge = errors.New("handshake: client metadata exceeds 512 bytes even after truncation")
