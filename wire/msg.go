package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Section kinds (payloadType) of an OP_MSG.
const (
	sectionBody     = 0 // a single BSON document
	sectionSequence = 1 // size, identifier cstring, zero or more documents
)

// Msg is an OP_MSG: flag bits, exactly one body document (section kind 0)
// and any number of document sequences (section kind 1).
//
// A Msg returned by DecodeMsg aliases the message bytes it was decoded from:
// its documents stay valid only as long as that buffer is not reused.
type Msg struct {
	// Flags are the message's flagBits. Set ChecksumPresent to have AppendMsg
	// append a CRC-32C checksum.
	Flags Flag
	// Body is the kind 0 section: the command (with "$db") or the reply.
	Body bson.Raw
	// Sequences are the kind 1 sections, such as the "documents" of an insert.
	// Their identifiers must be unique within the message.
	Sequences []Sequence
}

// Sequence is a kind 1 section: documents standing for the command argument
// named by Identifier, sent without the overhead of a BSON array.
type Sequence struct {
	// Identifier names the command argument, such as "documents".
	Identifier string
	// Documents are the BSON documents, in order. There may be none.
	Documents []bson.Raw
}

// castagnoli is the CRC-32C table of the OP_MSG checksum.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendMsg encodes m as an OP_MSG with the given requestID and responseTo,
// appends it to dst and returns the extended slice; dst may be a reused
// buffer (buf[:0]). The body comes first, then the sequences in order, then
// the checksum if m.Flags has ChecksumPresent.
//
// AppendMsg checks the structure it is given, cheaply: known flag bits only,
// every document's length prefix equal to its length and ending in 0, unique
// non-empty identifiers without NUL bytes, a total size that fits an int32.
// It does not validate the documents' contents. On error dst is returned
// unchanged. Checking the result against the server's maxMessageSizeBytes is
// the caller's job.
func AppendMsg(dst []byte, requestID, responseTo int32, m *Msg) ([]byte, error) {
	if m == nil {
		return dst, errors.New("wire: AppendMsg: nil *Msg")
	}
	if bad := m.Flags &^ knownFlags; bad != 0 {
		return dst, fmt.Errorf("wire: AppendMsg: undefined flag bits %#x set (only checksumPresent, moreToCome and exhaustAllowed exist)", uint32(bad))
	}
	if err := checkDocument(m.Body); err != nil {
		return dst, fmt.Errorf("wire: AppendMsg: body: %w", err)
	}
	size := int64(HeaderSize) + 4 + 1 + int64(len(m.Body))
	for i, s := range m.Sequences {
		n, err := sequenceSize(&s)
		if err != nil {
			return dst, fmt.Errorf("wire: AppendMsg: sequence %d (%q): %w", i, s.Identifier, err)
		}
		for _, prev := range m.Sequences[:i] {
			if prev.Identifier == s.Identifier {
				return dst, fmt.Errorf("wire: AppendMsg: two sequences named %q; identifiers must be unique", s.Identifier)
			}
		}
		size += 1 + n
	}
	if m.Flags&ChecksumPresent != 0 {
		size += 4
	}
	if size > math.MaxInt32 {
		return dst, fmt.Errorf("wire: AppendMsg: message of %d bytes does not fit an int32 length", size)
	}

	start := len(dst)
	dst = slices.Grow(dst, int(size))
	dst = AppendHeader(dst, Header{MessageLength: int32(size), RequestID: requestID, ResponseTo: responseTo, OpCode: OpMsg})
	dst = binary.LittleEndian.AppendUint32(dst, uint32(m.Flags))
	dst = append(dst, sectionBody)
	dst = append(dst, m.Body...)
	for i := range m.Sequences {
		s := &m.Sequences[i]
		n := 4 + len(s.Identifier) + 1 // validated above, so no overflow
		for _, d := range s.Documents {
			n += len(d)
		}
		dst = append(dst, sectionSequence)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
		dst = append(dst, s.Identifier...)
		dst = append(dst, 0)
		for _, d := range s.Documents {
			dst = append(dst, d...)
		}
	}
	if m.Flags&ChecksumPresent != 0 {
		dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
	}
	return dst, nil
}

// sequenceSize returns the size field of s as a kind 1 section (its 4 bytes
// included), after checking the identifier and the documents' framing.
func sequenceSize(s *Sequence) (int64, error) {
	if s.Identifier == "" {
		return 0, errors.New("empty identifier")
	}
	if i := bytes.IndexByte([]byte(s.Identifier), 0); i >= 0 {
		return 0, fmt.Errorf("identifier has a NUL byte at offset %d", i)
	}
	n := int64(4 + len(s.Identifier) + 1)
	for j, d := range s.Documents {
		if err := checkDocument(d); err != nil {
			return 0, fmt.Errorf("document %d: %w", j, err)
		}
		n += int64(len(d))
	}
	if n > math.MaxInt32 {
		return 0, fmt.Errorf("section of %d bytes does not fit an int32 size", n)
	}
	return n, nil
}

// checkDocument checks the framing of a document to be encoded: a length
// prefix equal to len(d), at least 5, and a final NUL.
func checkDocument(d bson.Raw) error {
	if len(d) < 5 {
		return fmt.Errorf("document of %d bytes is shorter than the 5-byte minimum", len(d))
	}
	if n := int32(binary.LittleEndian.Uint32(d)); int64(n) != int64(len(d)) {
		return fmt.Errorf("document length prefix is %d but the document holds %d bytes", n, len(d))
	}
	if d[len(d)-1] != 0 {
		return errors.New("document does not end with a NUL byte")
	}
	return nil
}
