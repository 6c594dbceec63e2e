package wire

import "context"

// DecodeReply decodes msg, one complete reply as ReadMessage returns it:
// an OP_COMPRESSED is decompressed (within maxMessageSize, <= 0 meaning
// DefaultMaxMessageSize, with any compressor) and must wrap an OP_MSG, and
// any other opcode is rejected. The returned header is that of the OP_MSG,
// which keeps the requestID and responseTo of the message received. Every
// error matches ErrProtocol.
//
// The returned Msg aliases msg, or the decompressed copy of it.
func DecodeReply(msg []byte, maxMessageSize int32) (Header, *Msg, error) {
	return DecodeReplyContext(context.Background(), msg, DecodeOptions{MaxMessageSize: maxMessageSize, Compressors: anyCompressor[:]})
}

// DecodeReplyContext is DecodeReply as a connection needs it: an
// OP_COMPRESSED must use one of opts.Compressors, and is decompressed within
// ctx (see DecompressContext). An error from ctx does not match ErrProtocol;
// every other error does.
func DecodeReplyContext(ctx context.Context, msg []byte, opts DecodeOptions) (Header, *Msg, error) {
	m := new(Msg)
	h, err := DecodeReplyInto(ctx, m, msg, opts)
	if err != nil {
		return h, nil, err
	}
	return h, m, nil
}

// DecodeReplyInto is DecodeReplyContext into m, which a connection reuses
// from reply to reply (see DecodeMsgInto).
func DecodeReplyInto(ctx context.Context, m *Msg, msg []byte, opts DecodeOptions) (Header, error) {
	h, err := ParseHeader(msg)
	if err != nil {
		return h, err
	}
	if h.OpCode == OpCompressed {
		if msg, err = DecompressContext(ctx, msg, opts); err != nil {
			return h, err
		}
	}
	return DecodeMsgInto(m, msg)
}
