// Package wire implements the MongoDB wire protocol as a driver needs it:
// the 16-byte message header, OP_MSG (the only opcode used for commands),
// OP_COMPRESSED (snappy, zlib and zstd), the framing of messages on a byte
// stream, and the reading of a server's command reply.
//
// The package knows nothing of connections or pooling. It turns commands into
// bytes and bytes into replies, and it treats every byte it reads as hostile:
// decoding validates every length, never panics, and allocates in proportion
// to the bytes a peer actually sent (a few times their size at most), within
// the caller's maximum message size, never to what the peer claims.
// Decompression refuses compressors that were not negotiated, and stops when
// the caller's context ends.
//
// A typical exchange, as the connection package performs it:
//
//	req, err := wire.AppendMsg(buf[:0], wire.NextRequestID(), 0, &wire.Msg{Body: cmd})
//	// optionally: req, err = wire.AppendCompressed(nil, req, wire.CompressorZstd, 0)
//	err = wire.WriteMessage(conn, req)
//	raw, err := wire.ReadMessage(conn, maxMessageSize)
//	hdr, reply, err := wire.DecodeReplyContext(ctx, raw, wire.DecodeOptions{
//		MaxMessageSize: maxMessageSize, Compressors: negotiated})
//	err = wire.CheckReply(reply.Body)
//
// Errors caused by bytes that break the protocol (a peer's fault) match
// ErrProtocol with errors.Is; errors from the underlying reader or writer are
// wrapped unchanged, so io.EOF and io.ErrUnexpectedEOF stay detectable.
package wire
