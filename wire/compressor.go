package wire

import (
	"strconv"
	"strings"
)

// CompressorID identifies the compressor of an OP_COMPRESSED message (its
// compressorId byte).
type CompressorID uint8

// The compressors of the OP_COMPRESSED specification. IDs 4-255 are reserved.
const (
	// CompressorNoop (0): the payload is not compressed. Only for testing.
	CompressorNoop CompressorID = 0
	// CompressorSnappy (1): the snappy block format.
	CompressorSnappy CompressorID = 1
	// CompressorZlib (2): zlib (RFC 1950), with a configurable level.
	CompressorZlib CompressorID = 2
	// CompressorZstd (3): Zstandard.
	CompressorZstd CompressorID = 3
)

// String returns the compressor's handshake name ("noop", "snappy", "zlib",
// "zstd"), or "compressor N" for a reserved ID.
func (c CompressorID) String() string {
	switch c {
	case CompressorNoop:
		return "noop"
	case CompressorSnappy:
		return "snappy"
	case CompressorZlib:
		return "zlib"
	case CompressorZstd:
		return "zstd"
	}
	return "compressor " + strconv.Itoa(int(c))
}

// ParseCompressor returns the compressor a handshake or connection string
// name stands for: "snappy", "zlib" or "zstd". It reports false for any other
// name, "noop" included, which is not one to negotiate.
func ParseCompressor(name string) (CompressorID, bool) {
	switch name {
	case "snappy":
		return CompressorSnappy, true
	case "zlib":
		return CompressorZlib, true
	case "zstd":
		return CompressorZstd, true
	}
	return 0, false
}

// The zlib compression levels (zlibCompressionLevel) AppendCompressed takes.
const (
	// ZlibDefaultLevel (-1) lets zlib choose (level 6).
	ZlibDefaultLevel = -1
	// ZlibMinLevel (0) stores without compressing.
	ZlibMinLevel = 0
	// ZlibMaxLevel (9) compresses best.
	ZlibMaxLevel = 9
)

// uncompressible are the commands whose messages must never be compressed,
// in lower case: the handshake and everything touching credentials.
var uncompressible = map[string]struct{}{
	"hello":           {},
	"ismaster":        {}, // legacy hello, in any case
	"saslstart":       {},
	"saslcontinue":    {},
	"getnonce":        {},
	"authenticate":    {},
	"createuser":      {},
	"updateuser":      {},
	"copydbsaslstart": {},
	"copydbgetnonce":  {},
	"copydb":          {},
}

// Compressible reports whether a message carrying the command commandName
// (the first key of the command document) may be compressed. It reports
// false for the commands the specification lists (hello, legacy hello,
// saslStart, saslContinue, getnonce, authenticate, createUser, updateUser,
// copydbSaslStart, copydbgetnonce, copydb), matched without regard to case,
// which errs on the side of not compressing.
func Compressible(commandName string) bool {
	if len(commandName) > len("copydbsaslstart") {
		return true
	}
	_, listed := uncompressible[strings.ToLower(commandName)]
	return !listed
}
