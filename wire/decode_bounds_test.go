package wire_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/internal/testkit"
	"github.com/mongopool/mongopool/wire"
)

// manySections builds an OP_MSG with an empty body and the given kind 1
// sections, each an identifier and a number of empty documents, appended
// directly so that millions of them are cheap to build. It returns the
// message and the offset of each section.
func manySections(n int, section func(i int) (id string, docs int)) ([]byte, []int) {
	msg := wire.AppendHeader(nil, wire.Header{RequestID: 7, OpCode: wire.OpMsg})
	msg = append(msg, 0, 0, 0, 0)       // flagBits
	msg = append(msg, 0, 5, 0, 0, 0, 0) // body: {}
	offsets := make([]int, 0, n)
	for i := range n {
		id, docs := section(i)
		offsets = append(offsets, len(msg))
		msg = append(msg, 1)
		msg = binary.LittleEndian.AppendUint32(msg, uint32(4+len(id)+1+5*docs))
		msg = append(append(msg, id...), 0)
		for range docs {
			msg = append(msg, 5, 0, 0, 0, 0)
		}
	}
	binary.LittleEndian.PutUint32(msg, uint32(len(msg)))
	return msg, offsets
}

func ident(i int) string {
	return string([]byte{byte('a' + i%26), byte('a' + i/26%26), byte('a' + i/676%26), byte('a' + i/17576%26), byte('a' + i/456976%26)})
}

// TestDecodeMsgHostileSections decodes messages of millions of empty
// documents, or of millions of sequences, as a hostile reply could be: the
// memory DecodeMsg allocates stays within a few times the message's size.
func TestDecodeMsgHostileSections(t *testing.T) {
	oneSeq, _ := manySections(1, func(int) (string, int) { return "documents", 2_000_000 })
	manySeqs, _ := manySections(1_000_000, func(i int) (string, int) { return ident(i), 0 })
	for name, msg := range map[string][]byte{"2M documents": oneSeq, "1M sequences": manySeqs} {
		t.Run(name, func(t *testing.T) {
			var m *wire.Msg
			var err error
			got := testkit.LeastAllocated(3, func() { _, m, err = wire.DecodeMsg(msg) })
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, s := range m.Sequences {
				n += len(s.Documents) + 1
			}
			t.Logf("%d-byte message of %d sections and documents: %d bytes allocated (%.1f times)", len(msg), n, got, float64(got)/float64(len(msg)))
			if got > 8*uint64(len(msg)) { // 25 to 30 times before sizing exactly
				t.Errorf("allocated %d bytes for a %d-byte message", got, len(msg))
			}
		})
	}
}

// TestDecodeMsgDuplicateAmongMany places a repeated identifier among
// thousands of sequences, in several places: the error names the second
// occurrence that comes first in the message, at its offset.
func TestDecodeMsgDuplicateAmongMany(t *testing.T) {
	const n = 5000
	for _, tc := range []struct{ first, second int }{{0, 1}, {100, 4999}, {4998, 4999}, {17, 18}, {3, 20}} {
		id := func(i int) (string, int) {
			if i == tc.second {
				i = tc.first
			}
			return ident(i), i % 3
		}
		msg, offsets := manySections(n, id)
		_, _, err := wire.DecodeMsg(msg)
		wantProtoErr(t, err, fmt.Sprintf("section at offset %d: identifier %q already used", offsets[tc.second], ident(tc.first)))
	}
	// Two repeats: the one whose second occurrence comes first is named.
	msg, offsets := manySections(n, func(i int) (string, int) {
		switch i {
		case 4000:
			i = 10
		case 3000:
			i = 2000
		}
		return ident(i), 1
	})
	_, _, err := wire.DecodeMsg(msg)
	wantProtoErr(t, err, fmt.Sprintf("section at offset %d: identifier %q already used", offsets[3000], ident(2000)))
}

// TestDecodeMsgSequencesDoNotShare checks that the documents of decoded
// sequences, which share one array, do not overlap: appending to one
// sequence leaves the next intact.
func TestDecodeMsgSequencesDoNotShare(t *testing.T) {
	d1 := doc(t, bson.D{{Key: "a", Value: 1}})
	d2 := doc(t, bson.D{{Key: "b", Value: 2}})
	_, m, err := wire.DecodeMsg(rawMsg(0, bodySec(d1), seqSec("x", d1), seqSec("y", d2), seqSec("z")))
	if err != nil {
		t.Fatal(err)
	}
	m.Sequences[0].Documents = append(m.Sequences[0].Documents, d1)
	if string(m.Sequences[1].Documents[0]) != string(d2) {
		t.Error("appending to one sequence's documents overwrote the next one's")
	}
	if m.Sequences[2].Documents != nil {
		t.Errorf("empty sequence has documents %v", m.Sequences[2].Documents)
	}
}
