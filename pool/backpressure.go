package pool

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
)

// mayBeOverload reports whether an error met while establishing a connection,
// up to and including the hello command, may come from an overloaded server:
// network errors and timeouts may; DNS failures, certificate and other
// non-I/O TLS errors, and the pool's own cancellations may not (the client
// backpressure rules of the CMAP specification). An I/O error during the TLS
// handshake is a network error and may.
func mayBeOverload(err error) bool {
	var (
		dns      *net.DNSError
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		alert    tls.AlertError
		header   tls.RecordHeaderError
		addr     *net.AddrError
	)
	switch {
	case errors.As(err, &dns), errors.As(err, &verify), errors.As(err, &unknown),
		errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &alert),
		errors.As(err, &header), errors.As(err, &addr):
		return false
	case errors.Is(err, context.Canceled):
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, context.DeadlineExceeded)
}
