package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

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
func Decompress(msg []byte, maxMessageSize int32) ([]byte, error) {
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
	if size < 0 {
		return nil, protoErrorf("OP_COMPRESSED: uncompressedSize %d is negative", size)
	}
	if int64(size)+HeaderSize > int64(maxMessageSize) {
		return nil, protoErrorf("OP_COMPRESSED: uncompressedSize %d makes a %d-byte message, above the maximum message size %d",
			size, int64(size)+HeaderSize, maxMessageSize)
	}
	if c > CompressorZstd {
		return nil, protoErrorf("OP_COMPRESSED: unknown compressorId %d (known: 0 noop, 1 snappy, 2 zlib, 3 zstd)", uint8(c))
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

	out := make([]byte, HeaderSize, HeaderSize+int(size))
	out = AppendHeader(out[:0], Header{MessageLength: HeaderSize + size, RequestID: h.RequestID, ResponseTo: h.ResponseTo, OpCode: orig})
	body := out[HeaderSize : HeaderSize+int(size)]
	switch c {
	case CompressorNoop:
		copy(body, payload)
	case CompressorSnappy:
		err = decodeSnappy(body, payload)
	case CompressorZlib:
		err = decodeZlib(body, payload)
	case CompressorZstd:
		err = decodeZstd(body, payload)
	}
	if err != nil {
		return nil, err
	}
	return out[:HeaderSize+int(size)], nil
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

// decodeZlib decodes the zlib stream src into dst, which it must fill
// exactly, with the stream ending (and its checksum verified) right there
// and no byte of src left over.
func decodeZlib(dst, src []byte) error {
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
		return corrupt(CompressorZlib, err)
	}
	defer zlibReaders.Put(zr)

	var one [1]byte
	n, err := io.ReadFull(zr, dst)
	if err != nil {
		// The reader's error is sticky: io.EOF again means the stream ended
		// cleanly (checksum verified) but short; anything else is corruption,
		// a truncated stream included.
		if _, again := zr.Read(one[:]); again == io.EOF {
			return sizeMismatch(CompressorZlib, int64(n), int32(len(dst)))
		}
		return corrupt(CompressorZlib, err)
	}
	// The stream must end here; reading to EOF also verifies its checksum.
	switch m, err := io.ReadFull(zr, one[:]); {
	case m > 0 || err == nil:
		return protoErrorf("OP_COMPRESSED: zlib payload decompresses to more than uncompressedSize %d", len(dst))
	case !errors.Is(err, io.EOF):
		return corrupt(CompressorZlib, err)
	}
	if br.Len() > 0 {
		return protoErrorf("OP_COMPRESSED: %d trailing bytes after the zlib stream", br.Len())
	}
	return nil
}

// zstdDecoder is the process's zstd decoder, created on first use. Its
// DecodeAll is safe for concurrent use; WithDecodeAllCapLimit makes it stop
// at the capacity of the destination, which bounds what a bomb can cost.
var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0), // GOMAXPROCS concurrent DecodeAll calls
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxMemory(math.MaxInt32),
	)
})

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
