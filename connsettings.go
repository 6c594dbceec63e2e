package mongopool

import (
	"context"
	"crypto/tls"
	"net"

	"github.com/mongopool/mongopool/auth"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/connstring"
	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/pool"
)

// connSettings are how a client connects to any of its servers, made once
// from the connection string and the client's options: the TLS files are
// read and the keys decrypted then, the credential's authenticator made,
// and each server's configuration is a copy with its address (and its TLS
// server name), made without I/O.
type connSettings struct {
	base connection.Config // Address unset; TLS, if any, without ServerName
}

// newConnSettings makes the settings of the connection string cs, with the
// client's dial function and TLS configuration (which replaces the
// connection string's tls options) when not nil.
func newConnSettings(cs *connstring.ConnString, dial func(context.Context, string, string) (net.Conn, error), tlsCfg *tls.Config) (connSettings, error) {
	cfg := connection.Config{
		ConnectTimeout: durationOr(cs.ConnectTimeout, pool.DefaultConnectTimeout),
		SocketTimeout:  durationOr(cs.SocketTimeout, 0),
		DialContext:    dial,
		Handshake: handshake.Options{
			AppName:      cs.AppName,
			Compressors:  cs.Compressors,
			LoadBalanced: isTrue(cs.LoadBalanced),
		},
		ZlibLevel: -1,
	}
	if cs.ZlibCompressionLevel != nil {
		cfg.ZlibLevel = *cs.ZlibCompressionLevel
	}
	if tlsCfg != nil {
		cfg.TLS = tlsCfg.Clone()
	} else {
		var err error
		if cfg.TLS, err = tlsConfig(cs, ""); err != nil {
			return connSettings{}, err
		}
	}
	if cs.AuthConfigured {
		a, err := auth.New(auth.Credential{
			Source:      cs.ResolvedAuthSource(),
			Username:    cs.Username,
			Password:    cs.Password,
			PasswordSet: cs.PasswordSet,
			Mechanism:   cs.AuthMechanism,
			Props:       cs.AuthMechanismProperties,
		})
		if err != nil {
			return connSettings{}, err
		}
		cfg.Auth = a
	}
	return connSettings{base: cfg}, nil
}

// forAddress returns how to connect to the server at address: the settings,
// with the address, and the server's host as the TLS server name unless the
// TLS configuration names one.
func (s connSettings) forAddress(address string) connection.Config {
	cfg := s.base
	cfg.Address = address
	if cfg.TLS != nil && cfg.TLS.ServerName == "" {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			host = address // a Unix socket
		}
		cfg.TLS = cfg.TLS.Clone()
		cfg.TLS.ServerName = host
	}
	return cfg
}
