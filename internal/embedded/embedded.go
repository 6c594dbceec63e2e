// Package embedded runs FerretDB in-process, on SQLite in a temporary
// directory: a real MongoDB-wire server that nobody here wrote, for the demo
// and the integration tests.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// Server is a running embedded FerretDB.
type Server struct {
	uri    string
	addr   string
	dir    string
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// Options configure Start.
type Options struct {
	// TLS, with the certificate and key files, serves TLS instead of plain TCP.
	TLS                       bool
	CertFile, KeyFile, CAFile string
	// Logger receives FerretDB's own log; nil discards it.
	Logger *slog.Logger
}

// Start starts FerretDB on 127.0.0.1 with a free port and waits until it
// accepts connections.
func Start(opts Options) (*Server, error) {
	dir, err := os.MkdirTemp("", "mongopool-ferretdb-")
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg := &ferretdb.Config{
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: "file:" + dir + "/",
	}
	if opts.TLS {
		cfg.Listener = ferretdb.ListenerConfig{TLS: "127.0.0.1:0", TLSCertFile: opts.CertFile, TLSKeyFile: opts.KeyFile, TLSCAFile: opts.CAFile}
	} else {
		cfg.Listener = ferretdb.ListenerConfig{TCP: "127.0.0.1:0"}
	}
	f, err := ferretdb.New(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting the embedded FerretDB: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{dir: dir, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- f.Run(ctx) }()

	// MongoDBURI is known once the listener is up.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.uri = f.MongoDBURI()
		if addr := hostOf(s.uri); addr != "" {
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				s.addr = addr
				return s, nil
			}
		}
		select {
		case err := <-s.done:
			s.cleanup()
			return nil, fmt.Errorf("the embedded FerretDB stopped: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, errors.New("the embedded FerretDB did not start listening within 10s")
		}
	}
}

// URI returns the connection string of the server.
func (s *Server) URI() string { return s.uri }

// Addr returns the host:port the server listens on.
func (s *Server) Addr() string { return s.addr }

// Close stops the server and removes its data. Closing twice is harmless.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.cancel()
		<-s.done
		s.cleanup()
	})
	return nil
}

func (s *Server) cleanup() { os.RemoveAll(s.dir) }

// hostOf returns the host:port of a mongodb:// URI, or "".
func hostOf(uri string) string {
	const prefix = "mongodb://"
	if len(uri) <= len(prefix) || uri[:len(prefix)] != prefix {
		return ""
	}
	rest := uri[len(prefix):]
	for i, r := range rest {
		if r == '/' || r == '?' {
			return rest[:i]
		}
	}
	return rest
}
