package wire

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// HeaderSize is the size in bytes of the standard message header that starts
// every wire protocol message.
const HeaderSize = 16

// OpCode identifies the type of a wire protocol message.
type OpCode int32

// The opcodes this package speaks. Every other opcode is rejected in replies.
const (
	// OpCompressed (2012) wraps another message compressed with a compressor.
	OpCompressed OpCode = 2012
	// OpMsg (2013) carries commands and their replies.
	OpMsg OpCode = 2013
)

// String returns the opcode's protocol name, such as "OP_MSG", or its number
// for opcodes this package does not speak.
func (o OpCode) String() string {
	switch o {
	case OpMsg:
		return "OP_MSG"
	case OpCompressed:
		return "OP_COMPRESSED"
	case 1:
		return "OP_REPLY"
	case 2004:
		return "OP_QUERY"
	}
	return "opcode " + strconv.Itoa(int(o))
}

// describe names an opcode with its number: "OP_QUERY (2004)", "opcode 7".
func (o OpCode) describe() string {
	s := o.String()
	if s[0] == 'O' {
		s += " (" + strconv.Itoa(int(o)) + ")"
	}
	return s
}

// Header is the standard message header (MsgHeader) that starts every
// message: four little-endian int32s.
type Header struct {
	// MessageLength is the total size of the message in bytes, header included.
	MessageLength int32
	// RequestID identifies the message.
	RequestID int32
	// ResponseTo is the RequestID of the message this one answers (0 in requests).
	ResponseTo int32
	// OpCode is the type of the message.
	OpCode OpCode
}

// ParseHeader reads the header at the start of msg. It checks only that msg
// holds 16 bytes; the decoders check the fields against the message.
func ParseHeader(msg []byte) (Header, error) {
	if len(msg) < HeaderSize {
		return Header{}, protoErrorf("message header needs %d bytes, got %d", HeaderSize, len(msg))
	}
	return Header{
		MessageLength: int32(binary.LittleEndian.Uint32(msg[0:])),
		RequestID:     int32(binary.LittleEndian.Uint32(msg[4:])),
		ResponseTo:    int32(binary.LittleEndian.Uint32(msg[8:])),
		OpCode:        OpCode(binary.LittleEndian.Uint32(msg[12:])),
	}, nil
}

// AppendHeader appends the 16 bytes of h to dst and returns the result.
func AppendHeader(dst []byte, h Header) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(h.MessageLength))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(h.RequestID))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(h.ResponseTo))
	return binary.LittleEndian.AppendUint32(dst, uint32(h.OpCode))
}

// checkFrame parses the header of msg and checks that its messageLength is
// exactly len(msg) and its opcode is want.
func checkFrame(msg []byte, want OpCode) (Header, error) {
	h, err := ParseHeader(msg)
	if err != nil {
		return h, err
	}
	if int64(h.MessageLength) != int64(len(msg)) {
		if int64(h.MessageLength) < int64(len(msg)) {
			return h, protoErrorf("%v: messageLength is %d but the buffer holds %d bytes (%d trailing bytes)",
				h.OpCode, h.MessageLength, len(msg), int64(len(msg))-int64(h.MessageLength))
		}
		return h, protoErrorf("%v: messageLength is %d but the buffer holds only %d bytes (truncated)",
			h.OpCode, h.MessageLength, len(msg))
	}
	if h.OpCode != want {
		return h, unexpectedOpCode(h.OpCode, want)
	}
	return h, nil
}

func unexpectedOpCode(got, want OpCode) error {
	if got == OpCompressed {
		return protoErrorf("got an OP_COMPRESSED message where %s was expected; decompress it first (Decompress or DecodeReply)", want.describe())
	}
	return protoErrorf("unsupported %s; only %s is accepted here", got.describe(), want.describe())
}

// String formats h for logs and test failures.
func (h Header) String() string {
	return fmt.Sprintf("{length %d, requestID %d, responseTo %d, %v}", h.MessageLength, h.RequestID, h.ResponseTo, h.OpCode)
}
