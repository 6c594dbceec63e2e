// Package embedded runs FerretDB in-process, on SQLite in a temporary
// directory: a real MongoDB-wire server that nobody here wrote, for the demo,
// its integration tests and the benchmarks.
package embedded

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"sync"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// Server is a running embedded FerretDB.
type Server struct {
	uri    string
	addr   string
	dir    string
	cancel context.CancelFunc
	done   chan struct{} // closed when FerretDB's Run has returned
	once   sync.Once
}

// Options configure Start.
type Options struct {
	// TLS, with the certificate and key files, serves TLS instead of plain TCP.
	TLS               bool
	CertFile, KeyFile string
}

// Start starts FerretDB on 127.0.0.1 with a free port. The server accepts
// connections when Start returns: FerretDB's constructor binds the listener,
// and connections wait in its backlog until the accept loop takes them.
func Start(opts Options) (*Server, error) {
	dir, err := os.MkdirTemp("", "mongopool-ferretdb-")
	if err != nil {
		return nil, err
	}
	cfg := &ferretdb.Config{
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler:   "sqlite",
		SQLiteURL: "file:" + dir + "/",
	}
	if opts.TLS {
		cfg.Listener = ferretdb.ListenerConfig{TLS: "127.0.0.1:0", TLSCertFile: opts.CertFile, TLSKeyFile: opts.KeyFile}
	} else {
		cfg.Listener = ferretdb.ListenerConfig{TCP: "127.0.0.1:0"}
	}
	f, err := ferretdb.New(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting the embedded FerretDB: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{dir: dir, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		f.Run(ctx) // returns nil, once ctx is canceled
	}()
	s.uri = f.MongoDBURI() // FerretDB builds it with net/url
	u, err := url.Parse(s.uri)
	if err != nil || u.Host == "" {
		s.Close()
		return nil, fmt.Errorf("the embedded FerretDB gave the URI %q, with no host", s.uri)
	}
	s.addr = u.Host
	return s, nil
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
		os.RemoveAll(s.dir)
	})
	return nil
}
