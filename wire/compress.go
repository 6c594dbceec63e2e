package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// compressedHeaderSize is the size of the fields OP_COMPRESSED adds after
// the standard header: originalOpcode, uncompressedSize, compressorId.
const compressedHeaderSize = 4 + 4 + 1

// AppendCompressed wraps msg, one complete message (such as AppendMsg
// builds), in an OP_COMPRESSED compressed with c, appends it to dst and
// returns the extended slice. The OP_COMPRESSED keeps the requestID and
// responseTo of msg; msg's opcode becomes originalOpcode and the rest of msg
// the compressed payload.
//
// zlibLevel (-1 to 9, -1 meaning zlib's default) applies only to
// CompressorZlib and is ignored otherwise. Whether a command may be
// compressed at all is the caller's decision: see Compressible. On error
// dst is returned unchanged.
func AppendCompressed(dst, msg []byte, c CompressorID, zlibLevel int) ([]byte, error) {
	h, err := checkOutgoing("AppendCompressed", msg)
	if err != nil {
		return dst, err
	}
	if h.OpCode == OpCompressed {
		return dst, fmt.Errorf("wire: AppendCompressed: message is already OP_COMPRESSED")
	}
	src := msg[HeaderSize:]

	start := len(dst)
	dst = AppendHeader(dst, Header{RequestID: h.RequestID, ResponseTo: h.ResponseTo, OpCode: OpCompressed}) // length patched below
	dst = binary.LittleEndian.AppendUint32(dst, uint32(h.OpCode))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(src)))
	dst = append(dst, byte(c))

	switch c {
	case CompressorNoop:
		dst = append(dst, src...)
	case CompressorSnappy:
		if dst, err = appendSnappy(dst, src); err != nil {
			return dst[:start], err
		}
	case CompressorZlib:
		if dst, err = appendZlib(dst, src, zlibLevel); err != nil {
			return dst[:start], err
		}
	case CompressorZstd:
		enc, err := zstdEncoder()
		if err != nil {
			return dst[:start], fmt.Errorf("wire: AppendCompressed: creating the zstd encoder: %w", err)
		}
		dst = enc.EncodeAll(src, dst)
	default:
		return dst[:start], fmt.Errorf("wire: AppendCompressed: unknown %v", c)
	}

	size := len(dst) - start
	if size > math.MaxInt32 {
		return dst[:start], fmt.Errorf("wire: AppendCompressed: compressed message of %d bytes does not fit an int32 length", size)
	}
	binary.LittleEndian.PutUint32(dst[start:], uint32(size))
	return dst, nil
}

// appendSnappy appends the snappy block encoding of src to dst.
func appendSnappy(dst, src []byte) ([]byte, error) {
	n := snappy.MaxEncodedLen(len(src))
	if n <= 0 {
		return dst, fmt.Errorf("wire: AppendCompressed: %d bytes are too many for snappy", len(src))
	}
	dst = slices.Grow(dst, n)
	out := snappy.Encode(dst[len(dst):len(dst)+n], src)
	if len(out) > 0 && &out[0] == &dst[len(dst) : len(dst)+1][0] {
		return dst[:len(dst)+len(out)], nil // encoded in place
	}
	return append(dst, out...), nil
}

// sliceWriter is an io.Writer appending to a slice.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// zlibWriter is a reusable zlib writer and its output.
type zlibWriter struct {
	out sliceWriter
	zw  *zlib.Writer
}

// zlibWriters pools writers per level, index level+1.
var zlibWriters [ZlibMaxLevel + 2]sync.Pool

// appendZlib appends the zlib encoding of src at level to dst.
func appendZlib(dst, src []byte, level int) ([]byte, error) {
	if level < ZlibDefaultLevel || level > ZlibMaxLevel {
		return dst, fmt.Errorf("wire: AppendCompressed: zlib compression level %d is outside -1..9", level)
	}
	pool := &zlibWriters[level+1]
	w, _ := pool.Get().(*zlibWriter)
	if w == nil {
		w = new(zlibWriter)
		zw, err := zlib.NewWriterLevel(&w.out, level)
		if err != nil {
			return dst, fmt.Errorf("wire: AppendCompressed: zlib level %d: %w", level, err)
		}
		w.zw = zw
	} else {
		w.zw.Reset(&w.out)
	}
	w.out.b = dst
	_, err := w.zw.Write(src)
	if err == nil {
		err = w.zw.Close()
	}
	dst, w.out.b = w.out.b, nil
	pool.Put(w)
	if err != nil {
		return dst, fmt.Errorf("wire: AppendCompressed: zlib: %w", err)
	}
	return dst, nil
}

// zstdEncoder is the process's zstd encoder, created on first use. Its
// EncodeAll is safe for concurrent use.
var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
})
