package bench

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

// Ferret is an in-process FerretDB on SQLite in a temporary directory: a
// MongoDB-wire server that neither pool's authors wrote, for the end-to-end
// shape.
type Ferret struct {
	addr   string
	dir    string
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// StartFerret starts FerretDB on 127.0.0.1 with a free port and returns once
// it accepts connections, or after 20 s with an error.
func StartFerret() (*Ferret, error) {
	dir, err := os.MkdirTemp("", "poolbench-ferretdb-")
	if err != nil {
		return nil, err
	}
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Handler:   "sqlite",
		SQLiteURL: "file:" + dir + "/",
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("bench: starting FerretDB: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Ferret{dir: dir, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- f.Run(ctx) }()

	// The listener's address is known only once Run has opened it.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	limit := time.NewTimer(20 * time.Second)
	defer limit.Stop()
	for {
		if addr := hostOf(f.MongoDBURI()); addr != "" {
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				s.addr = addr
				return s, nil
			}
		}
		select {
		case err := <-s.done:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("bench: FerretDB stopped while starting: %v", err)
		case <-limit.C:
			s.Close()
			return nil, errors.New("bench: FerretDB did not accept connections within 20 s")
		case <-tick.C:
		}
	}
}

// Addr returns the host:port FerretDB listens on.
func (s *Ferret) Addr() string { return s.addr }

// Close stops FerretDB and removes its data; a second call does nothing.
func (s *Ferret) Close() error {
	s.once.Do(func() {
		s.cancel()
		<-s.done
		os.RemoveAll(s.dir)
	})
	return nil
}

// hostOf returns the host:port of a mongodb:// URI, or "".
func hostOf(uri string) string {
	const scheme = "mongodb://"
	if len(uri) <= len(scheme) || uri[:len(scheme)] != scheme {
		return ""
	}
	rest := uri[len(scheme):]
	for i := 0; i < len(rest); i++ {
		if rest[i] == '/' || rest[i] == '?' {
			return rest[:i]
		}
	}
	return rest
}
