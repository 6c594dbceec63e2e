package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

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
	h, err := checkFrame(msg, OpMsg)
	if err != nil {
		return h, nil, err
	}
	if len(msg) < minMsgSize {
		return h, nil, protoErrorf("OP_MSG of %d bytes is shorter than the %d-byte minimum (header, flagBits, body)", len(msg), minMsgSize)
	}
	flags := Flag(binary.LittleEndian.Uint32(msg[HeaderSize:]))
	if bad := flags & requiredFlagMask &^ knownFlags; bad != 0 {
		return h, nil, protoErrorf("OP_MSG: unknown required flag bits %#x set (flagBits %#x)", uint32(bad), uint32(flags))
	}
	end := len(msg)
	if flags&ChecksumPresent != 0 {
		end -= 4
		if end < minMsgSize {
			return h, nil, protoErrorf("OP_MSG: checksumPresent is set but the message is too short to hold a body and a checksum")
		}
		want := binary.LittleEndian.Uint32(msg[end:])
		if got := crc32.Checksum(msg[:end], castagnoli); got != want {
			return h, nil, protoErrorf("OP_MSG: checksum mismatch: message carries %#08x, computed CRC-32C is %#08x", want, got)
		}
	}

	m := &Msg{Flags: flags}
	haveBody := false
	var seen map[string]struct{} // identifiers, once there are many sequences
	pos := HeaderSize + 4
	for pos < end {
		kind := msg[pos]
		at := pos
		pos++
		switch kind {
		case sectionBody:
			doc, err := readDocument(msg[pos:end])
			if err != nil {
				return h, nil, protoErrorf("OP_MSG: body section at offset %d: %w", at, err)
			}
			if haveBody {
				return h, nil, protoErrorf("OP_MSG: second body section (kind 0) at offset %d; exactly one is allowed", at)
			}
			haveBody = true
			m.Body = doc
			pos += len(doc)
		case sectionSequence:
			s, n, err := readSequence(msg[pos:end])
			if err != nil {
				return h, nil, protoErrorf("OP_MSG: document sequence section at offset %d: %w", at, err)
			}
			if dup := duplicateIdentifier(m.Sequences, &seen, s.Identifier); dup {
				return h, nil, protoErrorf("OP_MSG: document sequence section at offset %d: identifier %q already used; identifiers must be unique", at, s.Identifier)
			}
			m.Sequences = append(m.Sequences, s)
			pos += n
		default:
			return h, nil, protoErrorf("OP_MSG: unknown section kind %d at offset %d (only 0 and 1 exist)", kind, at)
		}
	}
	if !haveBody {
		return h, nil, protoErrorf("OP_MSG: no body section (kind 0); exactly one is required")
	}
	return h, m, nil
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

// readSequence reads the payload of a kind 1 section at the start of b (just
// after the kind byte) and returns it with its size.
func readSequence(b []byte) (Sequence, int, error) {
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
	for docs, off := sec[nul+1:], 4+nul+1; len(docs) > 0; {
		doc, err := readDocument(docs)
		if err != nil {
			return Sequence{}, 0, fmt.Errorf("identifier %q: document %d at section offset %d: %w", s.Identifier, len(s.Documents), off, err)
		}
		s.Documents = append(s.Documents, doc)
		docs = docs[len(doc):]
		off += len(doc)
	}
	return s, int(size), nil
}

// duplicateIdentifier reports whether id is already among seqs. It scans a
// few sequences and switches to a map beyond that, so that hostile messages
// with very many sequences cost linear time.
func duplicateIdentifier(seqs []Sequence, seen *map[string]struct{}, id string) bool {
	const scanLimit = 16
	if len(seqs) < scanLimit {
		for i := range seqs {
			if seqs[i].Identifier == id {
				return true
			}
		}
		return false
	}
	if *seen == nil {
		*seen = make(map[string]struct{}, 2*scanLimit)
		for i := range seqs {
			(*seen)[seqs[i].Identifier] = struct{}{}
		}
	}
	if _, ok := (*seen)[id]; ok {
		return true
	}
	(*seen)[id] = struct{}{}
	return false
}
