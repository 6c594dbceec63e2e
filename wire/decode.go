package wire

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/maphash"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// minMsgSize is the smallest possible OP_MSG: header, flagBits, and a body
// section holding an empty document.
const minMsgSize = HeaderSize + 4 + 1 + 5

// DecodeMsg decodes msg, one complete OP_MSG (header included, as ReadMessage
// returns it), and validates all of it:
//
//   - the header's messageLength equals len(msg) and the opcode is OP_MSG;
//   - no unknown required flag bit (0-15) is set; unknown optional bits
//     (16-31) are ignored but kept in Msg.Flags;
//   - with checksumPresent, the trailing CRC-32C matches;
//   - exactly one body section (kind 0), any number of sequences (kind 1)
//     with unique identifiers, no other kind;
//   - every length (document or section) is sane and stays within its
//     section, sections add up exactly to the message, identifiers are
//     NUL-terminated, and every document is valid BSON.
//
// The returned Msg aliases msg. Every error matches ErrProtocol.
func DecodeMsg(msg []byte) (Header, *Msg, error) {
	m := new(Msg)
	h, err := DecodeMsgInto(m, msg)
	if err != nil {
		return h, nil, err
	}
	return h, m, nil
}

// DecodeMsgInto is DecodeMsg into m, which a caller that decodes message
// after message reuses rather than allocating one each time. m is
// overwritten, and aliases msg afterwards; on an error its content is
// unspecified.
func DecodeMsgInto(m *Msg, msg []byte) (Header, error) {
	h, err := checkFrame(msg, OpMsg)
	if err != nil {
		return h, err
	}
	if len(msg) < minMsgSize {
		return h, protoErrorf("OP_MSG of %d bytes is shorter than the %d-byte minimum (header, flagBits, body)", len(msg), minMsgSize)
	}
	flags := Flag(binary.LittleEndian.Uint32(msg[HeaderSize:]))
	if bad := flags & requiredFlagMask &^ knownFlags; bad != 0 {
		return h, protoErrorf("OP_MSG: unknown required flag bits %#x set (flagBits %#x)", uint32(bad), uint32(flags))
	}
	end := len(msg)
	if flags&ChecksumPresent != 0 {
		end -= 4
		if end < minMsgSize {
			return h, protoErrorf("OP_MSG: checksumPresent is set but the message is too short to hold a body and a checksum")
		}
		want := binary.LittleEndian.Uint32(msg[end:])
		if got := crc32.Checksum(msg[:end], castagnoli); got != want {
			return h, protoErrorf("OP_MSG: checksum mismatch: message carries %#08x, computed CRC-32C is %#08x", want, got)
		}
	}

	*m = Msg{Flags: flags}
	haveBody := false
	// Slices sized exactly, rather than grown by appending, keep what a
	// message of millions of tiny sections or documents costs to a few
	// times its size.
	var docs []bson.Raw // every sequence's documents, back to back
	pos := HeaderSize + 4
	for pos < end {
		kind := msg[pos]
		at := pos
		pos++
		switch kind {
		case sectionBody:
			doc, err := readDocument(msg[pos:end])
			if err != nil {
				return h, protoErrorf("OP_MSG: body section at offset %d: %w", at, err)
			}
			if haveBody {
				return h, protoErrorf("OP_MSG: second body section (kind 0) at offset %d; exactly one is allowed", at)
			}
			haveBody = true
			m.Body = doc
			pos += len(doc)
		case sectionSequence:
			if m.Sequences == nil { // the first: size for this one and those after
				nSeq, nDocs := countSections(msg[at:end])
				m.Sequences = make([]Sequence, 0, nSeq)
				docs = make([]bson.Raw, 0, nDocs)
			}
			s, n, err := readSequence(msg[pos:end], &docs)
			if err != nil {
				return h, protoErrorf("OP_MSG: document sequence section at offset %d: %w", at, err)
			}
			if len(m.Sequences) < scanLimit && slices.ContainsFunc(m.Sequences, func(prev Sequence) bool { return prev.Identifier == s.Identifier }) {
				return h, duplicateError(at, s.Identifier)
			}
			m.Sequences = append(m.Sequences, s)
			pos += n
		default:
			return h, protoErrorf("OP_MSG: unknown section kind %d at offset %d (only 0 and 1 exist)", kind, at)
		}
	}
	if !haveBody {
		return h, protoErrorf("OP_MSG: no body section (kind 0); exactly one is required")
	}
	if len(m.Sequences) > scanLimit {
		if i := duplicateIdentifier(m.Sequences); i >= 0 {
			return h, duplicateError(sequenceOffset(msg[:end], i), m.Sequences[i].Identifier)
		}
	}
	return h, nil
}

func duplicateError(offset int, id string) error {
	return protoErrorf("OP_MSG: document sequence section at offset %d: identifier %q already used; identifiers must be unique", offset, id)
}

// readDocument reads the BSON document at the start of b, which must hold
// all of it, and validates it. It returns the document, aliasing b.
func readDocument(b []byte) (bson.Raw, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("document length needs 4 bytes, only %d remain", len(b))
	}
	n := int32(binary.LittleEndian.Uint32(b))
	if n < 5 {
		return nil, fmt.Errorf("document length %d is below the BSON minimum of 5", n)
	}
	if int64(n) > int64(len(b)) {
		return nil, fmt.Errorf("document length %d overruns its section by %d bytes", n, int64(n)-int64(len(b)))
	}
	doc := bson.Raw(b[:n])
	if err := doc.Validate(); err != nil {
		return nil, fmt.Errorf("invalid BSON document of %d bytes: %w", n, err)
	}
	return doc, nil
}

// countSections counts the kind 1 sections of b, the sections of an
// OP_MSG, and the documents they hold, from their length prefixes alone. It
// stops, with the counts so far, where the framing breaks: DecodeMsg then
// reports the error.
func countSections(b []byte) (sequences, documents int) {
	for len(b) > 0 {
		kind := b[0]
		b = b[1:]
		if len(b) < 4 {
			return
		}
		n := int64(int32(binary.LittleEndian.Uint32(b)))
		if n < 5 || n > int64(len(b)) {
			return
		}
		if kind == sectionSequence {
			sequences++
			sec := b[4:n]
			nul := bytes.IndexByte(sec, 0)
			if nul < 0 {
				return
			}
			for d := sec[nul+1:]; len(d) >= 4; {
				dn := int64(int32(binary.LittleEndian.Uint32(d)))
				if dn < 5 || dn > int64(len(d)) {
					break
				}
				documents++
				d = d[dn:]
			}
		}
		b = b[n:]
	}
	return
}

// readSequence reads the payload of a kind 1 section at the start of b (just
// after the kind byte) and returns it with its size. Its documents are
// appended to *docs, and the Sequence's Documents are that part of *docs.
func readSequence(b []byte, docs *[]bson.Raw) (Sequence, int, error) {
	if len(b) < 4 {
		return Sequence{}, 0, fmt.Errorf("size needs 4 bytes, only %d remain", len(b))
	}
	size := int32(binary.LittleEndian.Uint32(b))
	if size < 4+2 { // the size itself, a one-byte identifier and its NUL
		return Sequence{}, 0, fmt.Errorf("size %d is too small to hold the size and an identifier", size)
	}
	if int64(size) > int64(len(b)) {
		return Sequence{}, 0, fmt.Errorf("size %d overruns the message by %d bytes", size, int64(size)-int64(len(b)))
	}
	sec := b[4:size]
	nul := bytes.IndexByte(sec, 0)
	if nul < 0 {
		return Sequence{}, 0, fmt.Errorf("identifier cstring is not NUL-terminated within the section's %d bytes", size)
	}
	if nul == 0 {
		return Sequence{}, 0, errors.New("empty identifier")
	}
	s := Sequence{Identifier: string(sec[:nul])}
	first := len(*docs)
	for rest, off := sec[nul+1:], 4+nul+1; len(rest) > 0; {
		doc, err := readDocument(rest)
		if err != nil {
			return Sequence{}, 0, fmt.Errorf("identifier %q: document %d at section offset %d: %w", s.Identifier, len(*docs)-first, off, err)
		}
		*docs = append(*docs, doc)
		rest = rest[len(doc):]
		off += len(doc)
	}
	if n := len(*docs); n > first {
		s.Documents = (*docs)[first:n:n] // an append by the caller must not overwrite the next sequence's
	}
	return s, int(size), nil
}

// scanLimit is the number of sequences up to which DecodeMsg looks for a
// repeated identifier by scanning the ones before; beyond, it checks them
// all once they are read (see duplicateIdentifier).
const scanLimit = 16

// duplicateIdentifier returns the index of the first sequence of seqs, in
// message order, whose identifier an earlier one has, or -1. It sorts the
// identifiers' hashes, with a seed of its own so that no message can make
// them collide, which costs 16 bytes a sequence and well under a second for
// a hostile message of millions of sequences; a map of the identifiers
// would cost several times as much.
func duplicateIdentifier(seqs []Sequence) int {
	type entry struct {
		hash  uint64
		index int
	}
	seed := maphash.MakeSeed()
	es := make([]entry, len(seqs))
	for i := range seqs {
		es[i] = entry{maphash.String(seed, seqs[i].Identifier), i}
	}
	slices.SortFunc(es, func(a, b entry) int {
		if c := cmp.Compare(a.hash, b.hash); c != 0 {
			return c
		}
		return cmp.Compare(a.index, b.index)
	})
	dup := -1
	for run := 0; run < len(es); {
		end := run + 1
		for end < len(es) && es[end].hash == es[run].hash {
			end++
		}
		// Within a run of equal hashes, in message order: almost always
		// equal identifiers, so the first comparison settles each one.
		for j := run + 1; j < end; j++ {
			for k := run; k < j; k++ {
				if seqs[es[j].index].Identifier == seqs[es[k].index].Identifier {
					if dup < 0 || es[j].index < dup {
						dup = es[j].index
					}
					break
				}
			}
		}
		run = end
	}
	return dup
}

// sequenceOffset returns the offset in msg, a valid OP_MSG, of its kind 1
// section number i.
func sequenceOffset(msg []byte, i int) int {
	for pos := HeaderSize + 4; pos < len(msg); {
		n := int(binary.LittleEndian.Uint32(msg[pos+1:]))
		if msg[pos] == sectionSequence {
			if i == 0 {
				return pos
			}
			i--
		}
		pos += 1 + n
	}
	return -1
}
