package topology

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mongopool/mongopool/connstring"
)

// ReadPrefMode is a read preference's mode: which members of a replica set
// a read may go to. The zero value is ModePrimary, the specification's
// default.
type ReadPrefMode uint8

// The read preference modes of the server selection specification.
const (
	// ModePrimary: the primary only.
	ModePrimary ReadPrefMode = iota
	// ModePrimaryPreferred: the primary when there is one, otherwise an
	// eligible secondary.
	ModePrimaryPreferred
	// ModeSecondary: eligible secondaries only.
	ModeSecondary
	// ModeSecondaryPreferred: an eligible secondary when there is one,
	// otherwise the primary.
	ModeSecondaryPreferred
	// ModeNearest: the primary or an eligible secondary alike.
	ModeNearest
)

// readPrefModeNames are the modes' names in the connection string and in
// $readPreference.
var readPrefModeNames = [...]string{
	ModePrimary:            "primary",
	ModePrimaryPreferred:   "primaryPreferred",
	ModeSecondary:          "secondary",
	ModeSecondaryPreferred: "secondaryPreferred",
	ModeNearest:            "nearest",
}

// String returns the mode's name as the connection string and
// $readPreference spell it, such as "secondaryPreferred".
func (m ReadPrefMode) String() string {
	if int(m) < len(readPrefModeNames) {
		return readPrefModeNames[m]
	}
	return "ReadPrefMode(" + strconv.Itoa(int(m)) + ")"
}

// ErrInvalidReadPref is wrapped by the errors of a read preference the
// specification does not allow, on its own (see ReadPref.Validate) or with
// the topology it is used in (see Description.SelectCandidates).
var ErrInvalidReadPref = errors.New("invalid read preference")

// ParseReadPrefMode returns the mode of the given name: primary,
// primaryPreferred, secondary, secondaryPreferred or nearest, in any case.
func ParseReadPrefMode(name string) (ReadPrefMode, error) {
	for m, n := range readPrefModeNames {
		if strings.EqualFold(name, n) {
			return ReadPrefMode(m), nil
		}
	}
	return 0, invalidReadPref("unknown mode %q: want primary, primaryPreferred, secondary, secondaryPreferred or nearest",
		clip(name, maxShown))
}

// Tag is one tag of a tag set: a name and its value.
type Tag struct {
	Name, Value string
}

// TagSet is one tag set of a read preference: a server matches it when it
// has every one of its tags, with the same value. The empty TagSet matches
// every server; one that gives a name twice with different values matches
// none.
type TagSet []Tag

// matches reports whether a server with the given tags matches t: whether t
// is a subset of them.
func (t TagSet) matches(tags map[string]string) bool {
	for _, tag := range t {
		if v, ok := tags[tag.Name]; !ok || v != tag.Value {
			return false
		}
	}
	return true
}

// ReadPref is a read preference: which servers a read may go to.
//
// The zero ReadPref is the specification's default: mode primary, no tag
// sets, no maximum staleness.
type ReadPref struct {
	// Mode chooses between the primary and the secondaries.
	Mode ReadPrefMode
	// TagSets restrict the eligible servers: they are tried in order, and
	// the eligible servers are those that match the first tag set that at
	// least one candidate matches; none when no tag set matches any. Nil,
	// or empty, makes every candidate eligible, as the specification's
	// default [{}] does.
	TagSets []TagSet
	// MaxStaleness, when HasMaxStaleness, is the most a secondary's
	// estimated replication lag may be for it to be eligible: a whole
	// number of seconds, at least 90 s and at least heartbeatFrequencyMS
	// plus 10 s (the idle write period) in a replica set. Without
	// HasMaxStaleness there is no maximum (the specification's -1).
	MaxStaleness    time.Duration
	HasMaxStaleness bool
}

// The bounds of maxStalenessSeconds that depend on the topology: the
// max staleness specification's smallestMaxStalenessSeconds and
// idleWritePeriodMS.
const (
	smallestMaxStaleness = 90 * time.Second
	idleWritePeriod      = 10 * time.Second
)

// Validate returns an error wrapping ErrInvalidReadPref when rp breaks a
// rule of the specification that does not depend on the topology: a mode
// that is not one of the five; mode primary with a non-empty tag set, or
// with a positive maximum staleness; a negative maximum staleness, or one
// that is not a whole number of seconds. The bounds of a maximum staleness
// are checked at selection, in a replica set, against the client's
// heartbeatFrequencyMS.
func (rp ReadPref) Validate() error {
	if int(rp.Mode) >= len(readPrefModeNames) {
		return invalidReadPref("unknown mode %d", rp.Mode)
	}
	if rp.HasMaxStaleness {
		switch {
		case rp.MaxStaleness < 0:
			return invalidReadPref("maxStaleness %v is negative (leave it unset for no maximum)", rp.MaxStaleness)
		case rp.MaxStaleness%time.Second != 0:
			return invalidReadPref("maxStaleness %v is not a whole number of seconds", rp.MaxStaleness)
		case rp.MaxStaleness > 0 && rp.Mode == ModePrimary:
			return invalidReadPref("maxStaleness is not allowed with mode primary")
		}
	}
	if rp.Mode == ModePrimary {
		for _, t := range rp.TagSets {
			if len(t) > 0 {
				return invalidReadPref("tag sets are not allowed with mode primary")
			}
		}
	}
	return nil
}

// checkMaxStaleness returns an error wrapping ErrInvalidReadPref when a
// maximum staleness is too small for a replica set monitored every
// heartbeat: below 90 s, or below heartbeat plus the idle write period.
func checkMaxStaleness(maxStaleness, heartbeat time.Duration) error {
	least := max(smallestMaxStaleness, heartbeat+idleWritePeriod)
	if maxStaleness < least {
		return invalidReadPref("maxStaleness %v is less than %v, the least allowed: 90s, and heartbeatFrequencyMS (%v) plus the idle write period (10s)",
			maxStaleness, least, heartbeat)
	}
	return nil
}

// String describes rp for messages, bounded in length: the mode, then the
// tag sets and the maximum staleness when set, as in
// "secondary, tag sets [{dc: ny, rack: 1}, {}], maxStaleness 1m30s", the
// tags in their order.
func (rp ReadPref) String() string {
	var b strings.Builder
	b.WriteString(rp.Mode.String())
	if len(rp.TagSets) > 0 {
		b.WriteString(", tag sets [")
		for i, t := range rp.TagSets {
			if i == maxShownTagSets {
				fmt.Fprintf(&b, ", and %d more", len(rp.TagSets)-i)
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('{')
			for j, tag := range t {
				if j == maxShownTags {
					fmt.Fprintf(&b, ", and %d more", len(t)-j)
					break
				}
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString(oneLine(clip(tag.Name, maxShown)))
				b.WriteString(": ")
				b.WriteString(oneLine(clip(tag.Value, maxShown)))
			}
			b.WriteByte('}')
		}
		b.WriteByte(']')
	}
	if rp.HasMaxStaleness {
		fmt.Fprintf(&b, ", maxStaleness %v", rp.MaxStaleness)
	}
	return b.String()
}

// Bounds on what the messages show of what a caller or a connection string
// gave, so that their length does not depend on it.
const (
	maxShown        = 64 // bytes of a name or a value
	maxShownTags    = 8  // tags of a tag set
	maxShownTagSets = 8  // tag sets of a read preference
)

// clip returns s cut to at most n bytes, at the start of a UTF-8
// sequence, and marked with "..." when cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// ReadPrefFromConnString returns the read preference of a connection
// string: its readPreference (primary when absent), readPreferenceTags (a
// tag set each, its tags in order, an empty value the empty tag set) and
// maxStalenessSeconds (-1, or absent, for no maximum). It fails with an
// error wrapping ErrInvalidReadPref when the read preference breaks a rule
// of Validate. A nil cs gives the default read preference.
func ReadPrefFromConnString(cs *connstring.ConnString) (ReadPref, error) {
	if cs == nil {
		return ReadPref{}, nil
	}
	var rp ReadPref
	if cs.ReadPreference != "" {
		m, err := ParseReadPrefMode(cs.ReadPreference)
		if err != nil {
			return ReadPref{}, err
		}
		rp.Mode = m
	}
	if len(cs.ReadPreferenceTags) > 0 {
		rp.TagSets = make([]TagSet, 0, len(cs.ReadPreferenceTags))
		for _, set := range cs.ReadPreferenceTags {
			t := make(TagSet, 0, len(set))
			for _, tag := range set {
				t = append(t, Tag{Name: tag.Name, Value: tag.Value})
			}
			rp.TagSets = append(rp.TagSets, t)
		}
	}
	if s := cs.MaxStalenessSeconds; s != nil && *s != -1 {
		if *s < 0 || *s > maxStalenessSeconds {
			return ReadPref{}, invalidReadPref("maxStalenessSeconds %d is out of range: -1 for no maximum, or 90 to %d", *s, maxStalenessSeconds)
		}
		rp.MaxStaleness, rp.HasMaxStaleness = time.Duration(*s)*time.Second, true
	}
	if err := rp.Validate(); err != nil {
		return ReadPref{}, err
	}
	return rp, nil
}

// maxStalenessSeconds bounds maxStalenessSeconds, as the connection string
// does: an int32, which a time.Duration holds in seconds.
const maxStalenessSeconds = 1<<31 - 1

func invalidReadPref(format string, args ...any) error {
	return fmt.Errorf("topology: %w: %s", ErrInvalidReadPref, fmt.Sprintf(format, args...))
}
