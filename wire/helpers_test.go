package wire_test

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

// doc marshals d, failing the test on error.
func doc(t testing.TB, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatalf("bson.Marshal(%v): %v", d, err)
	}
	return b
}

func le32(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// bodySec builds a kind 0 section.
func bodySec(d []byte) []byte { return cat([]byte{0}, d) }

// seqSec builds a kind 1 section with a correct size.
func seqSec(id string, docs ...[]byte) []byte {
	payload := cat([]byte(id), []byte{0}, cat(docs...))
	return cat([]byte{1}, le32(int32(4+len(payload))), payload)
}

// frame builds a message with a correct messageLength around body (all
// that follows the header).
func frame(requestID, responseTo int32, op wire.OpCode, body ...[]byte) []byte {
	b := cat(body...)
	return cat(le32(int32(wire.HeaderSize+len(b))), le32(requestID), le32(responseTo), le32(int32(op)), b)
}

// rawMsg builds an OP_MSG from flagBits and sections, by hand.
func rawMsg(flags uint32, sections ...[]byte) []byte {
	return frame(7, 0, wire.OpMsg, cat(le32(int32(flags)), cat(sections...)))
}

// withChecksum appends a CRC-32C checksum to msg and fixes its length.
func withChecksum(msg []byte) []byte {
	out := cat(msg, make([]byte, 4))
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	sum := crc32.Checksum(out[:len(out)-4], crc32.MakeTable(crc32.Castagnoli))
	binary.LittleEndian.PutUint32(out[len(out)-4:], sum)
	return out
}

// wantProtoErr checks that err matches ErrProtocol and mentions each want.
func wantProtoErr(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one mentioning %q", want)
	}
	if !errors.Is(err, wire.ErrProtocol) {
		t.Errorf("error %q does not match ErrProtocol", err)
	}
	wantErrText(t, err, want...)
}

func wantErrText(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one mentioning %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	if strings.Count(err.Error(), "wire:") > 1 {
		t.Errorf("error %q repeats the package prefix", err)
	}
}

// equalMsg compares two messages' contents.
func equalMsg(a, b *wire.Msg) bool {
	if a.Flags != b.Flags || string(a.Body) != string(b.Body) || len(a.Sequences) != len(b.Sequences) {
		return false
	}
	for i := range a.Sequences {
		sa, sb := a.Sequences[i], b.Sequences[i]
		if sa.Identifier != sb.Identifier || len(sa.Documents) != len(sb.Documents) {
			return false
		}
		for j := range sa.Documents {
			if string(sa.Documents[j]) != string(sb.Documents[j]) {
				return false
			}
		}
	}
	return true
}
