package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// DecodeOptions say what DecompressContext and DecodeReplyContext accept.
type DecodeOptions struct {
	// MaxMessageSize bounds an OP_COMPRESSED's message once decompressed;
	// 0 or less means DefaultMaxMessageSize.
	MaxMessageSize int32
	// Compressors are the compressors an OP_COMPRESSED may use: those the
	// handshake negotiated. An OP_COMPRESSED using any other, and every
	// OP_COMPRESSED when Compressors is empty, is refused before anything is
	// decompressed.
	Compressors []CompressorID
}

// anyCompressor is what Decompress and DecodeReply accept.
var anyCompressor = [...]CompressorID{CompressorNoop, CompressorSnappy, CompressorZlib, CompressorZstd}

// inflateStep is the most that zlib and zstd inflate between two looks at
// the context: about a millisecond of work. Smaller zstd payloads are
// decoded in one call, which is faster.
const inflateStep = 1 << 20

// inflateRatio sizes the first output buffer of zlib and zstd at this many
// times the payload, which covers the usual compression ratios of BSON; the
// buffer then grows with the output actually produced, so that a payload
// claiming much and failing early costs little.
const inflateRatio = 8

// zstdMaxWindow is the largest window a zstd frame may declare when its
// message is smaller: zstd's standard levels 1 to 19 use at most 8 MiB
// (level 19: windowLog 23), as does this package's encoder. A decoder
// reading a frame in steps keeps a buffer of the window's size, so a window
// beyond both the message and this bound is a demand for memory that
// decoding does not need, and is refused.
const zstdMaxWindow = 8 << 20

// Decompress unwraps msg, one complete OP_COMPRESSED message (header
// included, as ReadMessage returns it), and returns the original message in
// a new slice: a header with the same requestID and responseTo, the
// originalOpcode, and a messageLength of 16 + uncompressedSize, followed by
// the decompressed payload.
//
// The declared uncompressedSize is checked against maxMessageSize (<= 0
// means DefaultMaxMessageSize) before anything is allocated, no decompressor
// is allowed to produce more than it, and the payload must decompress to
// exactly that size. An unknown compressor, a nested OP_COMPRESSED or a
// corrupt payload is an error. Every error matches ErrProtocol.
//
// Decompress accepts every compressor, noop included; a connection accepts
// only those it negotiated, with DecompressContext.
func Decompress(msg []byte, maxMessageSize int32) ([]byte, error) {
	return decompress(context.Background(), msg, DecodeOptions{MaxMessageSize: maxMessageSize, Compressors: anyCompressor[:]}, inflateStep)
}

// DecompressContext is Decompress for the compressors of opts only, within
// ctx. Output is produced in bounded steps, each about a millisecond of work
// (snappy, whose payload is at most 22 times smaller than its output,
// decodes in one), and ctx is consulted between them: once ctx is done, or
// its deadline has passed, DecompressContext stops and returns an error
// wrapping ctx.Err() (or context.DeadlineExceeded), which does not match
// ErrProtocol. The output buffer grows with the output actually produced.
// Every other error matches ErrProtocol.
func DecompressContext(ctx context.Context, msg []byte, opts DecodeOptions) ([]byte, error) {
	return decompress(ctx, msg, opts, inflateStep)
}

// decompress is DecompressContext with the step as a parameter, which the
// tests make small.
func decompress(ctx context.Context, msg []byte, opts DecodeOptions, step int) ([]byte, error) {
	maxMessageSize := opts.MaxMessageSize
	if maxMessageSize <= 0 {
		maxMessageSize = DefaultMaxMessageSize
	}
	h, err := checkFrame(msg, OpCompressed)
	if err != nil {
		return nil, err
	}
	if len(msg) < HeaderSize+compressedHeaderSize {
		return nil, protoErrorf("OP_COMPRESSED of %d bytes is shorter than the %d bytes of its headers", len(msg), HeaderSize+compressedHeaderSize)
	}
	orig := OpCode(binary.LittleEndian.Uint32(msg[HeaderSize:]))
	size := int32(binary.LittleEndian.Uint32(msg[HeaderSize+4:]))
	c := CompressorID(msg[HeaderSize+8])
	payload := msg[HeaderSize+compressedHeaderSize:]

	if orig == OpCompressed {
		return nil, protoErrorf("OP_COMPRESSED: originalOpcode is OP_COMPRESSED; nested compression is not allowed")
	}
	if c > CompressorZstd {
		return nil, protoErrorf("OP_COMPRESSED: unknown compressorId %d (known: 0 noop, 1 snappy, 2 zlib, 3 zstd)", uint8(c))
	}
	if !slices.Contains(opts.Compressors, c) {
		if len(opts.Compressors) == 0 {
			return nil, protoErrorf("OP_COMPRESSED with %v received, but no compressor was negotiated", c)
		}
		return nil, protoErrorf("OP_COMPRESSED with %v received, but only %v was negotiated", c, compressorList(opts.Compressors))
	}
	if size < 0 {
		return nil, protoErrorf("OP_COMPRESSED: uncompressedSize %d is negative", size)
	}
	if int64(size)+HeaderSize > int64(maxMessageSize) {
		return nil, protoErrorf("OP_COMPRESSED: uncompressedSize %d makes a %d-byte message, above the maximum message size %d",
			size, int64(size)+HeaderSize, maxMessageSize)
	}
	// Refuse what the payload cannot hold before allocating for it.
	switch c {
	case CompressorNoop:
		if len(payload) != int(size) {
			return nil, sizeMismatch(c, int64(len(payload)), size)
		}
	case CompressorSnappy:
		n, err := snappy.DecodedLen(payload)
		if err != nil {
			return nil, corrupt(c, err)
		}
		if n != int(size) {
			return nil, sizeMismatch(c, int64(n), size)
		}
	}
	if limit := maxExpansion[c] * int64(len(payload)); int64(size) > limit {
		return nil, protoErrorf("OP_COMPRESSED: uncompressedSize %d is impossible for a %d-byte %v payload, which expands at most %d:1",
			size, len(payload), c, maxExpansion[c])
	}
	if err := ctxDone(ctx); err != nil {
		return nil, stopped(c, 0, size, err)
	}

	hdr := Header{MessageLength: HeaderSize + size, RequestID: h.RequestID, ResponseTo: h.ResponseTo, OpCode: orig}
	switch c {
	case CompressorZlib:
		return inflateZlib(ctx, hdr, payload, step)
	case CompressorZstd:
		if int(size) > step {
			return inflateZstd(ctx, hdr, payload, step)
		}
	}
	// The whole output at once: noop and snappy, whose payload bounds it
	// closely, and small zstd payloads.
	out := make([]byte, HeaderSize, HeaderSize+int(size))
	out = AppendHeader(out[:0], hdr)
	body := out[HeaderSize : HeaderSize+int(size)]
	switch c {
	case CompressorNoop:
		copy(body, payload)
	case CompressorSnappy:
		err = decodeSnappy(body, payload)
	case CompressorZstd:
		err = decodeZstd(body, payload)
	}
	if err != nil {
		return nil, err
	}
	return out[:HeaderSize+int(size)], nil
}

// compressorList names compressors for an error message: "snappy, zlib".
func compressorList(cs []CompressorID) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.String()
	}
	return strings.Join(names, ", ")
}

// ctxDone returns why ctx is over: its error, or context.DeadlineExceeded
// once its deadline has passed even if its timer has not fired yet.
func ctxDone(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// stopped is the error of an inflation that ctx ended. It is not a
// protocol error: the message was fine as far as it was read.
func stopped(c CompressorID, done int, size int32, err error) error {
	return fmt.Errorf("wire: OP_COMPRESSED: %v decompression stopped after %d of %d bytes: %w", c, done, size, err)
}

// inflate reads the body of the message hdr describes from r, which
// decompresses a payload of payloadLen bytes with c, in steps of at most
// step bytes with a look at ctx between two. The buffer starts at
// inflateRatio times the payload and doubles as the output needs, up to the
// size hdr declares. The stream must end exactly there.
func inflate(ctx context.Context, c CompressorID, r io.Reader, hdr Header, payloadLen, step int) ([]byte, error) {
	size := int(hdr.MessageLength) - HeaderSize
	first := min(size, max(step, inflateRatio*payloadLen))
	out := AppendHeader(make([]byte, 0, HeaderSize+first), hdr)
	var one [1]byte
	for len(out) < HeaderSize+size {
		if len(out) > HeaderSize {
			if err := ctxDone(ctx); err != nil {
				return nil, stopped(c, len(out)-HeaderSize, int32(size), err)
			}
		}
		if len(out) == cap(out) {
			grown := make([]byte, len(out), HeaderSize+min(2*(cap(out)-HeaderSize), size))
			copy(grown, out)
			out = grown
		}
		n, err := io.ReadFull(r, out[len(out):min(cap(out), len(out)+step)])
		out = out[:len(out)+n]
		if err != nil {
			// The decompressors' errors are sticky: io.EOF again means the
			// stream ended cleanly (checksum verified) but short; anything
			// else is corruption, a truncated stream included.
			if _, again := r.Read(one[:]); again == io.EOF {
				return nil, sizeMismatch(c, int64(len(out)-HeaderSize), int32(size))
			}
			return nil, corrupt(c, err)
		}
	}
	// The stream must end here; reading to its end also verifies its
	// checksum.
	switch m, err := io.ReadFull(r, one[:]); {
	case m > 0 || err == nil:
		return nil, protoErrorf("OP_COMPRESSED: %v payload decompresses to more than uncompressedSize %d", c, size)
	case !errors.Is(err, io.EOF):
		return nil, corrupt(c, err)
	}
	return out, nil
}

// maxExpansion bounds, per compressor, the ratio of decompressed to
// compressed size, so that a claimed uncompressedSize out of proportion with
// the payload received is refused before allocating for it:
//
//   - snappy: a copy of at most 64 bytes takes at least 3 bytes (64/3 < 22);
//   - zlib: a deflate match of at most 258 bytes takes at least 2 bits (1032);
//   - zstd: a block yields at most 128 KiB and takes at least 4 bytes.
var maxExpansion = [...]int64{
	CompressorNoop:   1,
	CompressorSnappy: 22,
	CompressorZlib:   1032,
	CompressorZstd:   128 << 10 / 4,
}

func sizeMismatch(c CompressorID, got int64, want int32) error {
	return protoErrorf("OP_COMPRESSED: %v payload decompresses to %d bytes but uncompressedSize is %d", c, got, want)
}

func corrupt(c CompressorID, err error) error {
	return protoErrorf("OP_COMPRESSED: corrupt %v payload: %w", c, err)
}

// decodeSnappy decodes the snappy block src into dst, which it must fill
// exactly. The caller has checked the block's own length header against
// len(dst), so the decoder writes in place and never allocates.
func decodeSnappy(dst, src []byte) error {
	// DecodeStrict rejects the s2 extensions snappy.Decode accepts, as the
	// reference snappy decoder does.
	out, err := snappy.DecodeStrict(dst, src)
	if err != nil {
		return corrupt(CompressorSnappy, err)
	}
	if len(out) != len(dst) {
		return sizeMismatch(CompressorSnappy, int64(len(out)), int32(len(dst)))
	}
	if len(out) > 0 && &out[0] != &dst[0] {
		copy(dst, out) // not expected: dst is large enough
	}
	return nil
}

// zlibReaders pools zlib readers; each implements zlib.Resetter.
var zlibReaders sync.Pool

// inflateZlib decompresses the zlib stream src into the body of the message
// hdr describes, in steps (see inflate), with the stream ending (and its
// checksum verified) right there and no byte of src left over.
func inflateZlib(ctx context.Context, hdr Header, src []byte, step int) ([]byte, error) {
	br := bytes.NewReader(src) // an io.ByteReader: zlib reads no further than its stream
	zr, _ := zlibReaders.Get().(io.ReadCloser)
	var err error
	if zr == nil {
		zr, err = zlib.NewReader(br)
	} else {
		err = zr.(zlib.Resetter).Reset(br, nil)
	}
	if err != nil {
		if zr != nil {
			zlibReaders.Put(zr)
		}
		return nil, corrupt(CompressorZlib, err)
	}
	defer zlibReaders.Put(zr)

	out, err := inflate(ctx, CompressorZlib, zr, hdr, len(src), step)
	if err != nil {
		return nil, err
	}
	if br.Len() > 0 {
		return nil, protoErrorf("OP_COMPRESSED: %d trailing bytes after the zlib stream", br.Len())
	}
	return out, nil
}

// zstdDecoder is the process's zstd decoder for payloads decoded in one
// call, created on first use. Its DecodeAll is safe for concurrent use;
// WithDecodeAllCapLimit makes it stop at the capacity of the destination,
// which bounds what a bomb can cost.
var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0), // GOMAXPROCS concurrent DecodeAll calls
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxMemory(math.MaxInt32),
		zstd.WithDecoderMaxWindow(zstdMaxWindow), // as inflateZstd allows for these sizes
	)
})

// zstdStreams pools the synchronous (concurrency 1, so goroutine-free)
// zstd decoders that inflateZstd reads in steps.
var zstdStreams sync.Pool

// inflateZstd decompresses the zstd frames in src into the body of the
// message hdr describes, in steps (see inflate).
func inflateZstd(ctx context.Context, hdr Header, src []byte, step int) ([]byte, error) {
	size := int(hdr.MessageLength) - HeaderSize
	window := uint64(max(zstdMaxWindow, size))
	dec, _ := zstdStreams.Get().(*zstd.Decoder)
	if dec == nil {
		var err error
		if dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(math.MaxInt32)); err != nil {
			return nil, fmt.Errorf("wire: creating the zstd decoder: %w", err)
		}
	}
	defer func() {
		dec.Reset(nil) // drops src
		if window > zstdMaxWindow {
			dec.Close() // its buffers may be as large as the message: not worth keeping
			return
		}
		zstdStreams.Put(dec)
	}()
	// Each frame's window is checked against the bound before its buffer is
	// allocated.
	if err := dec.ResetWithOptions(bytes.NewReader(src), zstd.WithDecoderMaxWindow(window)); err != nil {
		return nil, corrupt(CompressorZstd, err)
	}
	return inflate(ctx, CompressorZstd, dec, hdr, len(src), step)
}

// decodeZstd decodes the zstd frames in src into dst, which it must fill
// exactly. Decoding never grows past cap(dst).
func decodeZstd(dst, src []byte) error {
	dec, err := zstdDecoder()
	if err != nil {
		return fmt.Errorf("wire: creating the zstd decoder: %w", err)
	}
	out, err := dec.DecodeAll(src, dst[:0:len(dst)])
	if err != nil {
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return protoErrorf("OP_COMPRESSED: zstd payload decompresses to more than uncompressedSize %d", len(dst))
		}
		if strings.Contains(err.Error(), "output bigger than") {
			// How the block decoder reports running out of room in dst.
			return protoErrorf("OP_COMPRESSED: zstd payload decompresses to more than uncompressedSize %d (%v)", len(dst), err)
		}
		return corrupt(CompressorZstd, err)
	}
	if len(out) != len(dst) {
		return sizeMismatch(CompressorZstd, int64(len(out)), int32(len(dst)))
	}
	if len(out) > 0 && &out[0] != &dst[0] {
		copy(dst, out) // not expected: the cap limit keeps it in place
	}
	return nil
}
