package mongopool_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mongopool/mongopool/auth"
	"github.com/mongopool/mongopool/internal/testpki"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
)

// The client backpressure rule of the CMAP specification, end to end through
// a pool and the real connector: a network error or timeout while establishing
// a connection, up to and including the hello, gets the labels
// SystemOverloadedError and RetryableError; an error of the authentication
// after the hello does not, even a network error, and neither does an error
// that never comes from overload, such as a certificate error.
//
// The table names each case after the step that fails and how. The step is
// checked too, from the error, so that a case cannot pass by failing at
// another step than the one it is about.
func TestBackpressureLabelsEndToEnd(t *testing.T) {
	var limits caseLimits
	for _, tc := range []struct {
		name string
		// setup returns the connection string of a server that fails as the
		// case says.
		setup func(t *testing.T) string
		// labels: whether the error must carry both labels (or neither).
		labels bool
		// duringAuth: whether the failure is after the hello.
		duringAuth bool
		// check looks at the error for the step and the cause.
		check func(t *testing.T, err error)
	}{
		{
			name:   "TCP connect refused",
			setup:  refusedURI,
			labels: true,
			check:  bpWantDialError(syscall.ECONNREFUSED),
		},
		{
			// The kernel completes the TCP handshake before the server's
			// accept, so the reset reaches the client either while its
			// connect is being completed (the socket's pending error) or at
			// its first I/O: writing or reading the hello.
			name:   "TCP connection reset as soon as accepted",
			setup:  bpResettingListener(false),
			labels: true,
			check:  bpWantDialOrHelloError(syscall.ECONNRESET, syscall.EPIPE),
		},
		{
			name:   "TCP connect timeout",
			setup:  bpFullBacklogListener,
			labels: true,
			check:  bpWantDialTimeout,
		},
		{
			name:   "TLS handshake reset",
			setup:  bpResettingListener(true),
			labels: true,
			check:  bpWantStepError("TLS handshake", syscall.ECONNRESET, syscall.EPIPE),
		},
		{
			name:   "TLS handshake timeout",
			setup:  bpSilentTLSServer,
			labels: true,
			check:  bpWantTLSTimeout,
		},
		{
			name:   "hello connection closed by failCommand closeConnection",
			setup:  bpHelloFailPoint(mongotest.FailPoint{CloseConnection: true}),
			labels: true,
			check:  bpWantStepError("hello", io.EOF, io.ErrUnexpectedEOF, syscall.ECONNRESET),
		},
		{
			name:   "hello reset in the middle of the reply",
			setup:  bpHelloFault(mongotest.FaultResetMidReply),
			labels: true,
			check:  bpWantStepError("hello", syscall.ECONNRESET),
		},
		{
			// Blocked for longer than the test runs: connectTimeoutMS ends
			// the hello, and the server's Close the block.
			name:   "hello timeout by failCommand blockConnection",
			setup:  bpHelloFailPoint(mongotest.FailPoint{BlockTime: time.Hour}),
			labels: true,
			check:  bpWantHelloTimeout,
		},
		{
			name:   "hello timeout: the reply never comes",
			setup:  bpHelloFault(mongotest.FaultHang),
			labels: true,
			check:  bpWantHelloTimeout,
		},
		{
			name:       "SCRAM wrong password after the hello",
			setup:      bpWrongPassword,
			duringAuth: true,
			check:      bpWantAuthError,
		},
		{
			// A network error, but after the hello: the specification says
			// the pool "MUST NOT add the backpressure error labels during an
			// authentication step after the hello message".
			name:       "SCRAM connection closed at saslContinue by failCommand closeConnection",
			setup:      bpSaslContinueFailPoint,
			duringAuth: true,
			check:      bpWantNetworkError(io.EOF, io.ErrUnexpectedEOF, syscall.ECONNRESET),
		},
		{
			name:       "SCRAM connection reset at saslContinue",
			setup:      bpSaslContinueReset,
			duringAuth: true,
			check:      bpWantNetworkError(syscall.ECONNRESET),
		},
		{
			name:  "TLS certificate of an unknown authority",
			setup: bpTLSWrongCA,
			check: bpWantCertificateError,
		},
		{
			name:  "TLS certificate for another host name",
			setup: bpTLSWrongHostname,
			check: bpWantCertificateError,
		},
	} {
		limits.run(t, tc.name, func(t *testing.T) {
			uri := tc.setup(t)
			events := newE2EEventLog()
			p := barePool(t, uri, pool.WithEventHandler(events.handler))
			events.attach(p)
			err := checkOutOnce(limits.ctx(t), p)
			if err == nil {
				t.Fatal("the check-out succeeded")
			}
			var cerr *pool.ConnectionError
			if !errors.As(err, &cerr) {
				t.Fatalf("check-out: %v (%T), want a *pool.ConnectionError", err, err)
			}
			if cerr.DuringAuth != tc.duringAuth {
				t.Fatalf("check-out: %v: after the hello: %v, want %v", err, cerr.DuringAuth, tc.duringAuth)
			}
			t.Logf("check-out: %v", err)
			tc.check(t, err)
			for _, l := range []string{pool.LabelSystemOverloaded, pool.LabelRetryable} {
				if got := pool.HasErrorLabel(err, l); got != tc.labels {
					t.Errorf("check-out: %v: label %s: %v, want %v", err, l, got, tc.labels)
				}
			}
			// The check-out's failure event carries the same error.
			failed := events.filter(func(e pool.Event) bool { return e.Type == pool.ConnectionCheckOutFailed })
			if len(failed) != 1 || failed[0].Reason != pool.ReasonConnectionError ||
				pool.HasErrorLabel(failed[0].Err, pool.LabelSystemOverloaded) != tc.labels {
				t.Errorf("ConnectionCheckOutFailed events %+v, want one with reason connectionError and the same labels", failed)
			}
		})
	}
}

// bpReset closes c so that the peer gets a TCP RST rather than a FIN.
func bpReset(c net.Conn) {
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
}

// bpResettingListener returns a setup whose server resets every connection:
// at once, or, with afterClientHello, once the client's TLS ClientHello
// arrives (the URI then asks for TLS).
func bpResettingListener(afterClientHello bool) func(t *testing.T) string {
	return func(t *testing.T) string {
		addr := rawListener(t, func(c net.Conn) {
			if afterClientHello {
				// The record header of the ClientHello: the client is inside
				// its TLS handshake now.
				if _, err := io.ReadFull(c, make([]byte, 5)); err != nil {
					c.Close()
					return
				}
			}
			bpReset(c)
		})
		if afterClientHello {
			return "mongodb://" + addr + "/?tls=true&tlsInsecure=true"
		}
		return "mongodb://" + addr + "/"
	}
}

// bpFullBacklogListener returns the URI of a listener whose accept queue is
// full, so that the kernel drops the SYN of a new connection and the client's
// connect times out. The connection package dials with its own net.Dialer,
// which offers no hook to fail a dial, so the test provokes the timeout in
// the kernel: the backlog is set to 0 (one queued connection fills it) and
// one connection is made and left unaccepted. This is Linux's behaviour; the
// case is skipped elsewhere.
func bpFullBacklogListener(t *testing.T) string {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux's handling of a full listen backlog (the SYN is dropped)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	rc, err := l.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = bpRelisten(syscall.Listen, fd) }); err != nil {
		t.Fatal(err)
	}
	if lerr != nil {
		t.Fatalf("setting the listen backlog to 0: %v", lerr)
	}
	filler, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filler.Close() })
	return "mongodb://" + l.Addr().String() + "/?connectTimeoutMS=300"
}

// bpRelisten calls listen(2) again on a listening socket, with a backlog of 0.
// It is generic because the socket's type differs between systems (an int
// on Unix, a Handle on Windows), and syscall.Listen follows.
func bpRelisten[FD ~int | ~uintptr](listen func(FD, int) error, fd uintptr) error {
	return listen(FD(fd), 0)
}

// bpSilentTLSServer returns the URI of a TLS server that accepts connections
// and then answers nothing, not even the TLS handshake.
func bpSilentTLSServer(t *testing.T) string {
	pki := testpki.New(t)
	s := server(t, mongotest.WithTLS(pki.ServerTLS()))
	if _, err := s.InjectFault(mongotest.Fault{Kind: mongotest.FaultSilentAccept}); err != nil {
		t.Fatal(err)
	}
	return s.URI() + "?tls=true&connectTimeoutMS=300&tlsCAFile=" + url.QueryEscape(pki.CAFile)
}

// bpHelloFault returns a setup whose server answers the hello with the fault
// kind.
func bpHelloFault(kind mongotest.FaultKind) func(t *testing.T) string {
	return func(t *testing.T) string {
		s := server(t)
		if _, err := s.InjectFault(mongotest.Fault{Kind: kind, Commands: []string{"hello"}}); err != nil {
			t.Fatal(err)
		}
		return s.URI() + "?connectTimeoutMS=300"
	}
}

// bpHelloFailPoint returns a setup whose server has the failCommand fail
// point fp on the handshake. The handshake of a client that is not
// load-balanced is the legacy hello, isMaster, which is the command name a
// fail point must give.
func bpHelloFailPoint(fp mongotest.FailPoint) func(t *testing.T) string {
	return func(t *testing.T) string {
		s := server(t)
		fp.Commands = []string{"isMaster"}
		if err := s.SetFailPoint(fp); err != nil {
			t.Fatal(err)
		}
		return s.URI() + "?connectTimeoutMS=300"
	}
}

// bpSaslContinueFailPoint returns the URI of a server that closes the
// connection when saslContinue comes (failCommand with closeConnection): the
// hello, which carries the first SCRAM step speculatively, has succeeded by
// then.
func bpSaslContinueFailPoint(t *testing.T) string {
	s := aliceServer(t, "right-password")
	if err := s.SetFailPoint(mongotest.FailPoint{Commands: []string{"saslContinue"}, CloseConnection: true}); err != nil {
		t.Fatal(err)
	}
	return "mongodb://alice:right-password@" + s.Addr() + "/?authMechanism=SCRAM-SHA-256"
}

// bpWrongPassword returns the URI of a server with a user, and the wrong
// password for it.
func bpWrongPassword(t *testing.T) string {
	return "mongodb://alice:wrong-password@" + aliceServer(t, "right-password").Addr() + "/?authMechanism=SCRAM-SHA-256"
}

// bpSaslContinueReset returns the URI of a server that resets the connection
// when it answers saslContinue: the hello (which carries the first SCRAM
// step, speculatively) has succeeded by then.
func bpSaslContinueReset(t *testing.T) string {
	s := aliceServer(t, "right-password")
	if _, err := s.InjectFault(mongotest.Fault{Kind: mongotest.FaultResetMidReply, Commands: []string{"saslContinue"}}); err != nil {
		t.Fatal(err)
	}
	return "mongodb://alice:right-password@" + s.Addr() + "/?authMechanism=SCRAM-SHA-256"
}

// bpTLSWrongCA returns the URI of a TLS server whose certificate the client's
// CA did not sign.
func bpTLSWrongCA(t *testing.T) string {
	s := server(t, mongotest.WithTLS(testpki.New(t).ServerTLS()))
	other := testpki.New(t)
	return s.URI() + "?tls=true&tlsCAFile=" + url.QueryEscape(other.CAFile)
}

// bpTLSWrongHostname returns the URI of a TLS server whose certificate, from
// the client's CA, names another host.
func bpTLSWrongHostname(t *testing.T) string {
	pki := testpki.New(t, "db.example")
	s := server(t, mongotest.WithTLS(pki.ServerTLS()))
	return s.URI() + "?tls=true&tlsCAFile=" + url.QueryEscape(pki.CAFile)
}

// bpIsAny reports whether err matches one of targets.
func bpIsAny(err error, targets ...error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// bpWantDialError checks that the dial failed, with one of causes.
func bpWantDialError(causes ...error) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" || !bpIsAny(err, causes...) {
			t.Fatalf("error %v, want a dial error caused by one of %v", err, causes)
		}
	}
}

// bpWantDialTimeout checks that the dial timed out.
func bpWantDialTimeout(t *testing.T, err error) {
	t.Helper()
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" || !op.Timeout() {
		t.Fatalf("error %v, want a dial that timed out", err)
	}
}

// bpWantDialOrHelloError checks that the dial or the hello failed, with one of
// causes.
func bpWantDialOrHelloError(causes ...error) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var op *net.OpError
		dial := errors.As(err, &op) && op.Op == "dial"
		if !(dial || strings.Contains(err.Error(), "hello")) || !bpIsAny(err, causes...) {
			t.Fatalf("error %v, want the dial or the hello to fail with one of %v", err, causes)
		}
	}
}

// bpWantStepError checks that the step (as the error names it: "hello",
// "TLS handshake") failed, with one of causes.
func bpWantStepError(step string, causes ...error) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		if !strings.Contains(err.Error(), step) || !bpIsAny(err, causes...) {
			t.Fatalf("error %v, want the %s to fail with one of %v", err, step, causes)
		}
	}
}

// bpWantHelloTimeout checks that the hello timed out.
func bpWantHelloTimeout(t *testing.T, err error) {
	t.Helper()
	var ne net.Error
	if !strings.Contains(err.Error(), "hello") || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("error %v, want the hello to time out", err)
	}
}

// bpWantTLSTimeout checks that the TLS handshake timed out.
func bpWantTLSTimeout(t *testing.T, err error) {
	t.Helper()
	var ne net.Error
	timedOut := errors.As(err, &ne) && ne.Timeout()
	if !strings.Contains(err.Error(), "TLS handshake") || !(timedOut || errors.Is(err, context.DeadlineExceeded)) {
		t.Fatalf("error %v, want the TLS handshake to time out", err)
	}
}

// bpWantAuthError checks that authentication failed as the server said.
func bpWantAuthError(t *testing.T, err error) {
	t.Helper()
	var ae *auth.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v, want an *auth.Error", err)
	}
}

// bpWantNetworkError checks for a network error, one of causes.
func bpWantNetworkError(causes ...error) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		if !bpIsAny(err, causes...) {
			t.Fatalf("error %v, want a network error, one of %v", err, causes)
		}
	}
}

// bpWantCertificateError checks that the server's certificate was refused.
func bpWantCertificateError(t *testing.T, err error) {
	t.Helper()
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
	)
	if !errors.As(err, &verify) && !errors.As(err, &unknown) && !errors.As(err, &hostname) {
		t.Fatalf("error %v, want a certificate verification error", err)
	}
}
