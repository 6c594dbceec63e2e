package pool_test

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// TestOptionValidation: every invalid option makes New fail with an
// *OptionError naming it and its value; the valid edge cases are accepted.
func TestOptionValidation(t *testing.T) {
	invalid := []struct {
		name   string
		opts   []pool.Option
		option string // OptionError.Option: the specification's name
		value  string // what Error() must show of the value; "-" for any negative value
		also   string // something else Error() must mention, if not ""
	}{
		{"maxPoolSize -1", []pool.Option{pool.WithMaxPoolSize(-1)}, "maxPoolSize", "-1", ""},
		{"minPoolSize -1", []pool.Option{pool.WithMinPoolSize(-1)}, "minPoolSize", "-1", ""},
		{"minPoolSize above maxPoolSize", []pool.Option{pool.WithMaxPoolSize(10), pool.WithMinPoolSize(11)}, "minPoolSize", "11", "maxPoolSize"},
		{"minPoolSize above the default maxPoolSize", []pool.Option{pool.WithMinPoolSize(101)}, "minPoolSize", "101", "maxPoolSize"},
		{"maxConnecting 0", []pool.Option{pool.WithMaxConnecting(0)}, "maxConnecting", "0", ""},
		{"maxConnecting -1", []pool.Option{pool.WithMaxConnecting(-1)}, "maxConnecting", "-1", ""},
		{"maxIdleTime negative", []pool.Option{pool.WithMaxIdleTime(-5 * time.Millisecond)}, "maxIdleTimeMS", "-5", ""},
		{"waitQueueTimeout negative", []pool.Option{pool.WithWaitQueueTimeout(-5 * time.Millisecond)}, "waitQueueTimeoutMS", "-5", ""},
		{"timeout negative", []pool.Option{pool.WithTimeout(-5 * time.Millisecond)}, "timeoutMS", "-5", ""},
		{"connectTimeout negative", []pool.Option{pool.WithConnectTimeout(-5 * time.Millisecond)}, "connectTimeoutMS", "-5", ""},
		// A negative duration shorter than a millisecond is still negative:
		// the error must not report it as 0, a valid value.
		{"maxIdleTime negative below 1ms", []pool.Option{pool.WithMaxIdleTime(-500 * time.Microsecond)}, "maxIdleTimeMS", "-", ""},
		{"waitQueueTimeout negative below 1ms", []pool.Option{pool.WithWaitQueueTimeout(-time.Nanosecond)}, "waitQueueTimeoutMS", "-", ""},
		{"timeout negative below 1ms", []pool.Option{pool.WithTimeout(-time.Microsecond)}, "timeoutMS", "-", ""},
		{"connectTimeout negative below 1ms", []pool.Option{pool.WithConnectTimeout(-999 * time.Microsecond)}, "connectTimeoutMS", "-", ""},
		// The maintenance interval is not a specification option; the pool
		// calls it maintenanceInterval.
		{"maintenance interval 0", []pool.Option{pool.WithMaintenanceInterval(0)}, "maintenanceInterval", "0", ""},
		// The observability options.
		{"flight recorder negative", []pool.Option{pool.WithFlightRecorder(-1)}, "flightRecorder", "-1", ""},
		{"flight recorder too large", []pool.Option{pool.WithFlightRecorder(1 << 20)}, "flightRecorder", "1048576", "65536"},
		{"leak threshold 0", []pool.Option{pool.WithLeakDetector(0, 8)}, "leakThreshold", "0", ""},
		{"leak threshold negative", []pool.Option{pool.WithLeakDetector(-time.Second, 8)}, "leakThreshold", "-1s", ""},
		{"leak frames negative", []pool.Option{pool.WithLeakDetector(time.Second, -1)}, "leakFrames", "-1", ""},
		{"leak frames too many", []pool.Option{pool.WithLeakDetector(time.Second, 1000)}, "leakFrames", "1000", "64"},
		{"use sampling 0", []pool.Option{pool.WithUseSampling(0)}, "useSampling", "0", ""},
		{"use sampling negative", []pool.Option{pool.WithUseSampling(-64)}, "useSampling", "-64", ""},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, err := pool.New("localhost:27017", &fakeConnector{}, tc.opts...)
				if err == nil {
					p.Close()
					t.Fatal("New succeeded")
				}
				if p != nil {
					t.Errorf("New returned a pool with its error")
				}
				var oe *pool.OptionError
				if !errors.As(err, &oe) {
					t.Fatalf("error %v (%T) is not an *OptionError", err, err)
				}
				if oe.Option != tc.option {
					t.Errorf("Option = %q, want %q", oe.Option, tc.option)
				}
				msg := err.Error()
				if !strings.Contains(msg, tc.option) {
					t.Errorf("%q does not name the option %s", msg, tc.option)
				}
				if tc.value == "-" {
					v := fmt.Sprint(oe.Value)
					if !strings.HasPrefix(v, "-") {
						t.Errorf("Value = %v: the negative value given is reported as a non-negative one", oe.Value)
					}
					if !strings.Contains(msg, v) || !strings.Contains(msg, tc.option+"=-") {
						t.Errorf("%q does not show the negative value given", msg)
					}
				} else if !strings.Contains(msg, tc.value) {
					t.Errorf("%q does not show the value %s", msg, tc.value)
				}
				if tc.also != "" && !strings.Contains(msg, tc.also) {
					t.Errorf("%q does not mention %s", msg, tc.also)
				}
			})
		})
	}

	valid := []struct {
		name  string
		opts  []pool.Option
		check func(t *testing.T, s pool.Stats)
	}{
		{"no options", nil, func(t *testing.T, s pool.Stats) {
			if s.MaxPoolSize != pool.DefaultMaxPoolSize || s.MinPoolSize != 0 || s.MaxConnecting != pool.DefaultMaxConnecting {
				t.Errorf("defaults: maxPoolSize %d, minPoolSize %d, maxConnecting %d", s.MaxPoolSize, s.MinPoolSize, s.MaxConnecting)
			}
		}},
		{"maxPoolSize 0 (unlimited) with minPoolSize 5", []pool.Option{pool.WithMaxPoolSize(0), pool.WithMinPoolSize(5)}, func(t *testing.T, s pool.Stats) {
			if s.MaxPoolSize != 0 || s.MinPoolSize != 5 {
				t.Errorf("maxPoolSize %d, minPoolSize %d", s.MaxPoolSize, s.MinPoolSize)
			}
		}},
		{"minPoolSize equal to maxPoolSize", []pool.Option{pool.WithMaxPoolSize(3), pool.WithMinPoolSize(3)}, nil},
		{"maxPoolSize 1", []pool.Option{pool.WithMaxPoolSize(1)}, nil},
		{"maxConnecting 1", []pool.Option{pool.WithMaxConnecting(1)}, func(t *testing.T, s pool.Stats) {
			if s.MaxConnecting != 1 {
				t.Errorf("maxConnecting %d", s.MaxConnecting)
			}
		}},
		{"negative maintenance interval", []pool.Option{pool.WithMaintenanceInterval(-1)}, nil},
		{"zero times mean no limit", []pool.Option{
			pool.WithMaxIdleTime(0), pool.WithWaitQueueTimeout(0), pool.WithTimeout(0), pool.WithConnectTimeout(0),
		}, nil},
		{"nil option", []pool.Option{nil, pool.WithMaxPoolSize(2), nil}, nil},
		{"an invalid value corrected by a later option", []pool.Option{pool.WithMaxConnecting(0), pool.WithMaxConnecting(1)}, nil},
		{"observability at its limits", []pool.Option{
			pool.WithFlightRecorder(0), pool.WithFlightRecorder(1 << 16), pool.WithLeakDetector(time.Nanosecond, 0),
			pool.WithLeakDetector(time.Hour, 64), pool.WithUseSampling(1),
		}, nil},
	}
	for _, tc := range valid {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, err := pool.New("localhost:27017", &fakeConnector{}, tc.opts...)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				defer p.Close()
				if tc.check != nil {
					tc.check(t, p.Stats())
				}
				if err := p.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
		})
	}
}

// TestOptionRequiredArguments: New needs an address and a Connector.
func TestOptionRequiredArguments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := pool.New("", &fakeConnector{})
		if err == nil {
			p.Close()
			t.Fatal("New with an empty address succeeded")
		}
		if p != nil {
			t.Error("New returned a pool with its error")
		}
		if !strings.Contains(err.Error(), "address") || !strings.Contains(err.Error(), "empty") {
			t.Errorf("empty address: unclear error %q", err)
		}

		p, err = pool.New("localhost:27017", nil)
		if err == nil {
			p.Close()
			t.Fatal("New with a nil Connector succeeded")
		}
		if p != nil {
			t.Error("New returned a pool with its error")
		}
		if !strings.Contains(err.Error(), "Connector") || !strings.Contains(err.Error(), "localhost:27017") {
			t.Errorf("nil connector: unclear error %q", err)
		}
	})
}

// TestOptionsInPoolCreatedEvent: the PoolCreated event's Options holds exactly
// the specification options the user set, times in milliseconds.
func TestOptionsInPoolCreatedEvent(t *testing.T) {
	cases := []struct {
		name string
		opts []pool.Option
		want map[string]int64
	}{
		{"none", nil, map[string]int64{}},
		{"all", []pool.Option{
			pool.WithMaxIdleTime(1500 * time.Millisecond), pool.WithMinPoolSize(2), pool.WithMaxPoolSize(20),
			pool.WithMaxConnecting(4), pool.WithWaitQueueTimeout(3 * time.Second),
		}, map[string]int64{"maxIdleTimeMS": 1500, "minPoolSize": 2, "maxPoolSize": 20, "maxConnecting": 4, "waitQueueTimeoutMS": 3000}},
		{"minPoolSize only", []pool.Option{pool.WithMinPoolSize(1)}, map[string]int64{"minPoolSize": 1}},
		{"defaults given explicitly", []pool.Option{pool.WithMaxPoolSize(pool.DefaultMaxPoolSize), pool.WithMaxConnecting(pool.DefaultMaxConnecting)},
			map[string]int64{"maxPoolSize": 100, "maxConnecting": 2}},
		{"zero values given explicitly", []pool.Option{pool.WithMaxPoolSize(0), pool.WithMinPoolSize(0), pool.WithMaxIdleTime(0), pool.WithWaitQueueTimeout(0)},
			map[string]int64{"maxPoolSize": 0, "minPoolSize": 0, "maxIdleTimeMS": 0, "waitQueueTimeoutMS": 0}},
		{"non-specification options", []pool.Option{
			pool.WithTimeout(time.Second), pool.WithConnectTimeout(time.Second), pool.WithMaintenanceInterval(-1),
			pool.WithLoadBalanced(true),
		}, map[string]int64{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var created []pool.Event
				opts := append([]pool.Option{pool.WithEventHandler(func(e pool.Event) {
					if e.Type == pool.PoolCreated {
						created = append(created, e)
					}
				})}, tc.opts...)
				p, err := pool.New("localhost:27017", &fakeConnector{}, opts...)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				synctest.Wait() // the events are delivered on the pool's goroutine
				if len(created) != 1 {
					t.Fatalf("%d PoolCreated events, want 1", len(created))
				}
				e := created[0]
				if e.Address != "localhost:27017" {
					t.Errorf("Address = %q", e.Address)
				}
				if !maps.Equal(e.Options, tc.want) {
					t.Errorf("Options = %v, want %v", e.Options, tc.want)
				}
				if err := p.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
		})
	}
}
