package topology

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mongopool/mongopool/connstring"
)

func TestReadPrefModeNames(t *testing.T) {
	for _, c := range []struct {
		name string
		mode ReadPrefMode
	}{
		{"primary", ModePrimary},
		{"primaryPreferred", ModePrimaryPreferred},
		{"secondary", ModeSecondary},
		{"secondaryPreferred", ModeSecondaryPreferred},
		{"nearest", ModeNearest},
	} {
		if got := c.mode.String(); got != c.name {
			t.Errorf("%d.String() = %q, want %q", c.mode, got, c.name)
		}
		for _, spelling := range []string{c.name, strings.ToUpper(c.name), strings.ToUpper(c.name[:1]) + c.name[1:]} {
			if m, err := ParseReadPrefMode(spelling); err != nil || m != c.mode {
				t.Errorf("ParseReadPrefMode(%q) = %v, %v; want %v", spelling, m, err, c.mode)
			}
		}
	}
	if got := ReadPrefMode(9).String(); got != "ReadPrefMode(9)" {
		t.Errorf("String of an unknown mode: %q", got)
	}
}

func TestParseReadPrefModeRefuses(t *testing.T) {
	for _, name := range []string{"", "secondary ", "primarypreferred2", "closest", strings.Repeat("x", 1<<20)} {
		m, err := ParseReadPrefMode(name)
		if !errors.Is(err, ErrInvalidReadPref) {
			t.Fatalf("ParseReadPrefMode(%.20q) = %v, %v; want an error wrapping ErrInvalidReadPref", name, m, err)
		}
		if !strings.Contains(err.Error(), "unknown mode") || len(err.Error()) > 300 {
			t.Errorf("ParseReadPrefMode(%.20q): error %.400q should name the problem in a bounded message", name, err)
		}
	}
}

func TestReadPrefValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		rp   ReadPref
		want string // in the error; "" for none
	}{
		{"zero", ReadPref{}, ""},
		{"primary with empty tag sets", ReadPref{TagSets: []TagSet{{}, {}}}, ""},
		{"primary with no maximum", ReadPref{MaxStaleness: time.Minute}, ""},
		{"primary with a zero maximum", ReadPref{HasMaxStaleness: true}, ""},
		{"secondary with tags and maximum", ReadPref{Mode: ModeSecondary, TagSets: []TagSet{ts("dc", "ny"), {}},
			MaxStaleness: 90 * time.Second, HasMaxStaleness: true}, ""},
		{"nearest with a small maximum", ReadPref{Mode: ModeNearest, MaxStaleness: time.Second, HasMaxStaleness: true}, ""},
		{"unknown mode", ReadPref{Mode: 5}, "unknown mode 5"},
		{"primary with tags", ReadPref{TagSets: []TagSet{{}, ts("dc", "ny")}}, "tag sets are not allowed with mode primary"},
		{"primary with a maximum", ReadPref{MaxStaleness: 90 * time.Second, HasMaxStaleness: true},
			"maxStaleness is not allowed with mode primary"},
		{"negative maximum", ReadPref{Mode: ModeNearest, MaxStaleness: -time.Second, HasMaxStaleness: true},
			"maxStaleness -1s is negative"},
		{"fractional maximum", ReadPref{Mode: ModeNearest, MaxStaleness: 90500 * time.Millisecond, HasMaxStaleness: true},
			"maxStaleness 1m30.5s is not a whole number of seconds"},
	} {
		err := c.rp.Validate()
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidReadPref) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v; want an error wrapping ErrInvalidReadPref with %q", c.name, err, c.want)
		}
	}
}

func TestReadPrefString(t *testing.T) {
	rp := ReadPref{Mode: ModeSecondary, TagSets: []TagSet{ts("rack", "1", "dc", "ny"), {}},
		MaxStaleness: 90 * time.Second, HasMaxStaleness: true}
	if got, want := rp.String(), "secondary, tag sets [{rack: 1, dc: ny}, {}], maxStaleness 1m30s"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (ReadPref{}).String(); got != "primary" {
		t.Errorf("zero ReadPref: %q", got)
	}

	// Names and values stay on one line, and are cut between characters.
	odd := ReadPref{Mode: ModeNearest, TagSets: []TagSet{ts("a\nb", "x"+strings.Repeat("é", 100))}}
	if got, want := odd.String(), "nearest, tag sets [{a b: x"+strings.Repeat("é", 31)+"...}]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}

	// Whatever the caller gave, the description stays short.
	var huge TagSet
	long := strings.Repeat("v", 1<<16)
	for range 1000 {
		huge = append(huge, Tag{Name: long, Value: long})
	}
	big := ReadPref{Mode: ModeNearest}
	for range 1000 {
		big.TagSets = append(big.TagSets, huge)
	}
	s := big.String()
	if len(s) > 12000 || !strings.Contains(s, "and 992 more") || !strings.Contains(s, "and 992 more}") {
		t.Errorf("String() of 1000 tag sets of 1000 long tags: %d bytes, %.300q...", len(s), s)
	}
}

func TestReadPrefFromConnString(t *testing.T) {
	for _, c := range []struct {
		uri  string
		want ReadPref
	}{
		{"mongodb://a/", ReadPref{}},
		{"mongodb://a/?readPreference=primary", ReadPref{}},
		{"mongodb://a/?readPreference=secondaryPreferred&readPreferenceTags=dc:ny,rack:1&readPreferenceTags=",
			ReadPref{Mode: ModeSecondaryPreferred, TagSets: []TagSet{ts("dc", "ny", "rack", "1"), {}}}},
		{"mongodb://a/?readPreference=nearest&maxStalenessSeconds=120",
			ReadPref{Mode: ModeNearest, MaxStaleness: 120 * time.Second, HasMaxStaleness: true}},
		{"mongodb://a/?readPreference=secondary&maxStalenessSeconds=-1", ReadPref{Mode: ModeSecondary}},
		{"mongodb://a/?maxStalenessSeconds=-1", ReadPref{}},
		{"mongodb://a/?readPreference=primaryPreferred&readPreferenceTags=dc:ny,dc:sf",
			ReadPref{Mode: ModePrimaryPreferred, TagSets: []TagSet{ts("dc", "ny", "dc", "sf")}}},
	} {
		cs, err := connstring.Parse(c.uri)
		if err != nil {
			t.Fatalf("%s: %v", c.uri, err)
		}
		got, err := ReadPrefFromConnString(cs)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v, %v; want %+v", c.uri, got, err, c.want)
		}
	}
	if got, err := ReadPrefFromConnString(nil); err != nil || !reflect.DeepEqual(got, ReadPref{}) {
		t.Errorf("nil: got %+v, %v; want the default", got, err)
	}
}

func TestReadPrefFromConnStringRefuses(t *testing.T) {
	n := func(i int) *int { return &i }
	for _, c := range []struct {
		name string
		cs   connstring.ConnString
		want string
	}{
		{"unknown mode", connstring.ConnString{ReadPreference: "fastest"}, `unknown mode "fastest"`},
		// What connstring.Parse refuses on its own, from a ConnString made
		// by hand.
		{"tags with primary", connstring.ConnString{ReadPreferenceTags: []connstring.TagSet{{{Name: "dc", Value: "ny"}}}},
			"tag sets are not allowed with mode primary"},
		{"maximum with primary", connstring.ConnString{MaxStalenessSeconds: n(120)},
			"maxStaleness is not allowed with mode primary"},
		{"negative maximum", connstring.ConnString{ReadPreference: "nearest", MaxStalenessSeconds: n(-2)},
			"maxStalenessSeconds -2 is out of range"},
		{"maximum beyond int32", connstring.ConnString{ReadPreference: "nearest", MaxStalenessSeconds: n(1 << 40)},
			"maxStalenessSeconds 1099511627776 is out of range"},
	} {
		rp, err := ReadPrefFromConnString(&c.cs)
		if !errors.Is(err, ErrInvalidReadPref) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %+v, %v; want an error wrapping ErrInvalidReadPref with %q", c.name, rp, err, c.want)
		}
	}
}

func TestCriteriaFromConnString(t *testing.T) {
	for _, c := range []struct {
		uri  string
		want Criteria
	}{
		{"mongodb://a/", Criteria{}},
		{"mongodb://a/?heartbeatFrequencyMS=2000&localThresholdMS=30&readPreference=nearest",
			Criteria{ReadPref: ReadPref{Mode: ModeNearest}, HeartbeatFrequency: 2 * time.Second, LocalThreshold: 30 * time.Millisecond}},
		// localThresholdMS=0 is a window of width zero, not the default.
		{"mongodb://a/?localThresholdMS=0", Criteria{LocalThreshold: -1}},
	} {
		cs, err := connstring.Parse(c.uri)
		if err != nil {
			t.Fatalf("%s: %v", c.uri, err)
		}
		got, err := CriteriaFromConnString(cs)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v, %v; want %+v", c.uri, got, err, c.want)
		}
	}
	if got, err := CriteriaFromConnString(nil); err != nil || !reflect.DeepEqual(got, Criteria{}) {
		t.Errorf("nil: got %+v, %v", got, err)
	}
	bad := connstring.ConnString{ReadPreference: "fastest"}
	if _, err := CriteriaFromConnString(&bad); !errors.Is(err, ErrInvalidReadPref) {
		t.Errorf("a bad read preference: %v", err)
	}
}
