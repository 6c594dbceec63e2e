package wire

import (
	"fmt"
	"strings"
)

// Flag holds the flagBits of an OP_MSG. The low 16 bits are required: a
// receiver must fail on one it does not know. The high 16 bits are optional
// and ignored when unknown.
type Flag uint32

// The flag bits the OP_MSG specification defines.
const (
	// ChecksumPresent (bit 0) means a CRC-32C checksum of the message follows
	// the sections. AppendMsg computes it when the bit is set; DecodeMsg
	// verifies it whenever it is present.
	ChecksumPresent Flag = 1 << 0
	// MoreToCome (bit 1) on a request means no reply will be sent; on a reply
	// it means another reply follows without a further request.
	MoreToCome Flag = 1 << 1
	// ExhaustAllowed (bit 16) on a request means the client accepts several
	// replies (flagged MoreToCome) to it. Only for getMore and hello.
	ExhaustAllowed Flag = 1 << 16
)

// knownFlags are the bits a message may carry; requiredFlagMask the bits a
// receiver must understand.
const (
	knownFlags       = ChecksumPresent | MoreToCome | ExhaustAllowed
	requiredFlagMask = Flag(0xFFFF)
)

// String lists the set flags by name, such as "checksumPresent|moreToCome",
// with any other bits in hex; "0" when none is set.
func (f Flag) String() string {
	if f == 0 {
		return "0"
	}
	var names []string
	for _, n := range []struct {
		bit  Flag
		name string
	}{{ChecksumPresent, "checksumPresent"}, {MoreToCome, "moreToCome"}, {ExhaustAllowed, "exhaustAllowed"}} {
		if f&n.bit != 0 {
			names = append(names, n.name)
		}
	}
	if rest := f &^ knownFlags; rest != 0 {
		names = append(names, fmt.Sprintf("%#x", uint32(rest)))
	}
	return strings.Join(names, "|")
}
