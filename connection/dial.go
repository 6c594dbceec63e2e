package connection

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/auth"
	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/internal/sockio"
	"github.com/mongopool/mongopool/wire"
)

// Config says how to establish connections to one server.
type Config struct {
	// Address is "host:port", or the path of a Unix socket (ending in .sock).
	Address string
	// ConnectTimeout bounds the TCP connect, the TLS handshake and the hello
	// (connectTimeoutMS); 0 means none beyond the context's.
	ConnectTimeout time.Duration
	// SocketTimeout bounds each command's I/O (socketTimeoutMS); 0 means none
	// beyond the context's.
	SocketTimeout time.Duration
	// TLS, if not nil, wraps the connection in TLS with this configuration.
	TLS *tls.Config
	// Handshake holds the hello's options: appName, compressors, loadBalanced.
	Handshake handshake.Options
	// ZlibLevel is zlibCompressionLevel (-1 for the library's default).
	ZlibLevel int
	// Auth, if not nil, authenticates each connection. Share one between the
	// connections of a pool: it caches the SCRAM keys it derives.
	Auth *auth.Authenticator
	// DialContext, if not nil, opens the socket instead of a net.Dialer
	// (network is "tcp" or "unix"); TLS, when configured, still goes over
	// it. Tests use it to connect through net.Pipe.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
	// BusyPoller, if not nil, polls the socket for a moment before a read
	// of a reply would park, while it sees no other reply awaited (see
	// BusyPoller). A getMore's reply is not polled for: it may wait for
	// data.
	BusyPoller *BusyPoller
}

// Hooks let the caller follow an establishment.
type Hooks struct {
	// HelloDone, if not nil, is called once the hello succeeded, with the
	// reply's description. Errors after it are authentication errors.
	HelloDone func(*handshake.Description)
	// HelloReply, if not nil, is called as soon as the hello's reply is
	// read, before it is checked, with the reply document and the time
	// from sending the hello to reading its reply. It gets even a reply
	// that Dial then refuses (ok: 0, wire versions out of range), which a
	// server monitor still needs to describe the server. The reply is the
	// callee's to keep.
	HelloReply func(reply bson.Raw, rtt time.Duration)
}

// Dial establishes a connection: dial, TLS, hello, authentication. ctx bounds
// it all; cfg's timeouts bound their own steps within it. On error nothing is
// left open.
func Dial(ctx context.Context, cfg *Config, hooks Hooks) (*Conn, error) {
	authn := cfg.Auth
	hs := cfg.Handshake
	hs.Address = cfg.Address
	var spec *auth.Speculation
	if authn != nil {
		var err error
		hs.SaslSupportedMechs = authn.SaslSupportedMechs()
		if spec, err = authn.Speculate(); err != nil {
			return nil, err
		}
		hs.SpeculativeAuthenticate = spec.Command()
	}
	hello, err := handshake.Command(hs)
	if err != nil {
		return nil, err
	}

	// Dial, TLS and hello under connectTimeoutMS.
	early := ctx
	if cfg.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		early, cancel = context.WithTimeout(ctx, cfg.ConnectTimeout)
		defer cancel()
	}
	nc, err := dialNet(early, cfg)
	if err != nil {
		return nil, err
	}
	c := &Conn{
		nc:            nc,
		sock:          sockio.New(nc),
		address:       cfg.Address,
		socketTimeout: cfg.SocketTimeout,
		zlibLevel:     cfg.ZlibLevel,
		poller:        cfg.BusyPoller,
		maxBSON:       handshake.DefaultMaxBSONObjectSize,
		// Until the server tells its limits, a reply is a hello reply,
		// which MongoDB never makes larger than a command.
		maxMessage: helloMessageSize,
		// The hello reply may use any compressor the hello offered.
		accept: compressorIDs(hs.Compressors),
	}
	c.br = bufio.NewReaderSize(c.sock, readBufferSize)
	c.interruptFn = c.interrupt
	c.pollSock = c.poller.Socket(nc)
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()

	start := time.Now()
	reply, err := c.roundTrip(early, hello)
	if err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	if hooks.HelloReply != nil {
		hooks.HelloReply(reply, time.Since(start))
	}
	desc, err := handshake.Parse(reply, hs)
	if err != nil {
		return nil, err
	}
	c.desc = desc
	// Parse lowered the limits to MongoDB's own, at most.
	c.maxBSON = desc.MaxBSONObjectSize
	c.maxMessage = desc.MaxMessageSizeBytes
	c.accept = compressorIDs(desc.Compressors)
	if id, known := wire.ParseCompressor(desc.Compressor); known {
		c.compressor = id
	}
	if hooks.HelloDone != nil {
		hooks.HelloDone(desc)
	}

	if authn != nil {
		h := auth.Hello{
			SaslSupportedMechs:      desc.SaslSupportedMechs,
			SpeculativeAuthenticate: desc.SpeculativeAuthenticate,
			Arbiter:                 desc.IsArbiter(),
		}
		if err := spec.Finish(ctx, c, h); err != nil {
			return nil, err
		}
	}
	ok = true
	return c, nil
}

// helloMessageSize bounds the message carrying the hello reply: a reply
// document of handshake.MaxReplySize in an OP_MSG with a checksum, or in an
// OP_COMPRESSED of that size once decompressed.
const helloMessageSize = handshake.MaxReplySize + msgOverhead + 4

// compressorIDs returns the wire IDs of the known names among names.
func compressorIDs(names []string) []wire.CompressorID {
	var ids []wire.CompressorID
	for _, n := range names {
		if id, ok := wire.ParseCompressor(n); ok && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// dialNet opens the socket, and TLS over it when configured.
func dialNet(ctx context.Context, cfg *Config) (net.Conn, error) {
	network := "tcp"
	if strings.HasSuffix(cfg.Address, ".sock") {
		network = "unix"
	}
	var nc net.Conn
	var err error
	if cfg.DialContext != nil {
		nc, err = cfg.DialContext(ctx, network, cfg.Address)
		if err == nil && nc == nil {
			err = fmt.Errorf("connecting to %s: the DialContext function returned neither a connection nor an error", cfg.Address)
		}
	} else {
		var d net.Dialer
		nc, err = d.DialContext(ctx, network, cfg.Address)
	}
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetKeepAlive(true)
		tc.SetNoDelay(true)
	}
	if cfg.TLS == nil {
		return nc, nil
	}
	tcfg := cfg.TLS
	if tcfg.ServerName == "" && !tcfg.InsecureSkipVerify {
		tcfg = tcfg.Clone()
		if host, _, err := net.SplitHostPort(cfg.Address); err == nil {
			tcfg.ServerName = host
		}
	}
	tc := tls.Client(nc, tcfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("TLS handshake with %s: %w", cfg.Address, err)
	}
	return tc, nil
}
