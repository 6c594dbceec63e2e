package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxMessageSize is the maximum message size, in bytes, that servers
// announce as maxMessageSizeBytes. It applies where a function is given a
// maximum of 0 or less.
const DefaultMaxMessageSize = 48000000

// initialReadCap is the buffer ReadMessage starts with; it doubles as bytes
// arrive, up to the declared length.
const initialReadCap = 16 << 10

// ReadMessage reads exactly one message from r and returns all of it, header
// included, in a newly allocated slice.
//
// A declared messageLength that is below 16 (negative included) or above
// maxMessageSize is an error matching ErrProtocol; maxMessageSize <= 0 means
// DefaultMaxMessageSize. The buffer grows as bytes actually arrive, doubling
// up to the declared length, so a peer that claims a large message and sends
// little costs little memory.
//
// At a clean end of stream before any byte, the error wraps io.EOF; if the
// stream ends inside the message, it wraps io.ErrUnexpectedEOF. Other read
// errors are wrapped as they are.
func ReadMessage(r io.Reader, maxMessageSize int32) ([]byte, error) {
	if maxMessageSize <= 0 {
		maxMessageSize = DefaultMaxMessageSize
	}
	var hdr [HeaderSize]byte
	var n int
	var err error
	if br, ok := r.(*bufio.Reader); ok {
		n, err = peekHeader(br, &hdr)
	} else {
		// Read through an interface, an array of the caller's would move
		// to the heap whichever way ReadMessage went: only this way pays.
		h := new([HeaderSize]byte)
		n, err = io.ReadFull(r, h[:])
		hdr = *h
	}
	if err != nil {
		if n == 0 {
			return nil, fmt.Errorf("wire: reading message header: %w", err)
		}
		return nil, fmt.Errorf("wire: message header truncated after %d of %d bytes: %w", n, HeaderSize, err)
	}
	length := int32(binary.LittleEndian.Uint32(hdr[:]))
	if err := checkLength(length, maxMessageSize); err != nil {
		return nil, err
	}
	buf := make([]byte, HeaderSize, min(int(length), initialReadCap))
	copy(buf, hdr[:])
	for len(buf) < int(length) {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), int(length)))
			copy(grown, buf)
			buf = grown
		}
		n, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("wire: message truncated: got %d of the %d bytes its header declares: %w", len(buf), length, err)
		}
	}
	return buf, nil
}

// peekHeader reads a message header from br into hdr, as io.ReadFull
// would: a stream that ends inside it is io.ErrUnexpectedEOF.
func peekHeader(br *bufio.Reader, hdr *[HeaderSize]byte) (int, error) {
	b, err := br.Peek(HeaderSize)
	n := copy(hdr[:], b)
	br.Discard(n)
	if err != nil && n > 0 && errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// checkLength checks a declared messageLength against the bounds.
func checkLength(length, maxMessageSize int32) error {
	switch {
	case length < 0:
		return protoErrorf("message length %d is negative", length)
	case length < HeaderSize:
		return protoErrorf("message length %d is below the %d-byte header size", length, HeaderSize)
	case length > maxMessageSize:
		return protoErrorf("message length %d exceeds the maximum message size %d", length, maxMessageSize)
	}
	return nil
}

// WriteMessage writes msg, one complete message as AppendMsg or
// AppendCompressed build it, to w. It refuses a msg whose header does not
// declare its length, so a corrupt buffer never reaches the peer.
func WriteMessage(w io.Writer, msg []byte) error {
	if _, err := checkOutgoing("WriteMessage", msg); err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("wire: writing message: %w", err)
	}
	return nil
}

// checkOutgoing parses the header of msg, a message the caller built, and
// checks that it declares len(msg). The errors name fn and are not protocol
// errors: the bytes are the caller's, not a peer's.
func checkOutgoing(fn string, msg []byte) (Header, error) {
	h, err := ParseHeader(msg)
	if err != nil {
		return h, fmt.Errorf("wire: %s: %d bytes do not form a message", fn, len(msg))
	}
	if int64(h.MessageLength) != int64(len(msg)) {
		return h, fmt.Errorf("wire: %s: header declares %d bytes but the message holds %d", fn, h.MessageLength, len(msg))
	}
	return h, nil
}
