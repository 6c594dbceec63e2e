package topology

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/connection"
)

// TestRTTMonitor: while the monitor streams, the RTT goroutine samples the
// round trip time every heartbeat on a connection of its own: the
// handshake's hello first, then a hello. A round that fails (the connection
// closed, or no reply within connectTimeoutMS) is not reported, makes no
// event and adds no sample; the next round, a heartbeat later, makes a new
// connection. The streamed descriptions carry the average and minimum of the
// samples, and nothing else of them.
func TestRTTMonitor(t *testing.T) {
	for _, tc := range []struct {
		fault fakeFault
		// when the second connection is made: a heartbeat after the
		// failure, which comes once the server has taken its 100 ms and
		// closed the connection, or after connectTimeoutMS without reply
		redial time.Duration
	}{
		{faultClose, 20210 * time.Millisecond},
		{faultHang, 22110 * time.Millisecond},
	} {
		t.Run(fmt.Sprint(tc.fault), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeServer(t)
				f.set(func(f *fakeServer) {
					f.streamable = true
					f.delay = func(q fakeRequest) time.Duration {
						switch {
						case q.conn == 0:
							return 10 * time.Millisecond
						case q.conn == 1:
							return 100 * time.Millisecond
						case q.n == 0:
							return 200 * time.Millisecond
						}
						return 50 * time.Millisecond
					}
					f.fault = faultWhere(tc.fault, func(q fakeRequest, _ int) bool { return q.conn == 1 && q.n == 1 })
				})
				_, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringStream, Conn: connection.Config{ConnectTimeout: 2 * time.Second}})
				sleepUntil(r, 41*time.Second)
				wantLines(t, r.linesWith("ok"),
					"10ms ok Standalone rtt 10ms min 0s tv 0",
					"10.01s ok Standalone rtt 28ms min 10ms tv 0",
					"20.01s ok Standalone rtt 28ms min 10ms tv 0",
					"30.01s ok Standalone rtt 62.4ms min 10ms tv 0",
					"40.01s ok Standalone rtt 59.92ms min 10ms tv 0",
				)
				if got := append(r.linesWith("error"), r.linesWith("failed")...); len(got) != 0 {
					t.Errorf("the RTT goroutine's failure was reported: %q", got)
				}
				var got []string
				for _, q := range f.requests() {
					if q.conn > 0 {
						got = append(got, fmt.Sprintf("%d %s %v", q.conn, q.name, q.at.Sub(r.t0)))
					}
				}
				wantLines(t, got[:min(len(got), 4)],
					"1 isMaster 10ms",
					"1 hello 10.11s",
					fmt.Sprintf("2 isMaster %v", tc.redial),
					fmt.Sprintf("2 hello %v", tc.redial+10200*time.Millisecond),
				)
				if !f.isClosed(1) || f.isClosed(2) {
					t.Errorf("closed: the failed RTT connection %v, the new one %v", f.isClosed(1), f.isClosed(2))
				}
			})
		})
	}
}

// TestRTTMonitorKeepsOnAfterFailedCheck: a failed check forgets the samples,
// and the RTT goroutine, untouched, goes on adding new ones.
func TestRTTMonitorKeepsOnAfterFailedCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(t)
		f.set(func(f *fakeServer) {
			f.streamable = true
			f.delay = rttHelloDelay(40*time.Millisecond, 100*time.Millisecond)
			// The second streamed reply, at 20.1 s, closes the connection.
			f.fault = faultWhere(faultClose, func(q fakeRequest, k int) bool { return q.conn == 0 && q.awaited && k == 1 })
		})
		_, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringStream})
		sleepUntil(r, 35*time.Second)
		wantLines(t, r.linesWith(" ok "),
			"100ms ok Standalone rtt 100ms min 0s tv 0",
			"10.1s ok Standalone rtt 100ms min 100ms tv 0",
			// 20.1 s: the stream fails, the samples are forgotten. The
			// RTT goroutine's hello of 20.24 s (40 ms), then the new
			// connection's handshake at 30.1 s (100 ms), are the
			// samples.
			"30.2s ok Standalone rtt 52ms min 40ms tv 0",
		)
		if got := r.linesWith("error"); len(got) != 1 || got[0] != "20.1s error network" {
			t.Errorf("errors: %q", got)
		}
		if f.connections() != 3 || f.isClosed(1) {
			t.Errorf("%d connections, the RTT one closed: %v; want 3, open", f.connections(), f.isClosed(1))
		}
	})
}
