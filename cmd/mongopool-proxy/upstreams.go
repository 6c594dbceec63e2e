package main

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/mongopool/mongopool"
)

// upstreams are the proxy's upstream credentials beside -upstream's: those
// of -upstream-as, fixed, and those of the config file's "upstreams",
// which a reload adds, replaces and removes. All share -upstream's
// topology.
type upstreams struct {
	// make makes the client of an upstream credential, sharing
	// -upstream's topology, its pools no larger than maxPoolSize (0: the
	// URI's).
	make  func(what, name, uri string, maxPoolSize int) (*mongopool.Client, error)
	fixed map[string]*mongopool.Client // -upstream-as

	mu     sync.Mutex                // protects following fields
	loaded map[string]loadedUpstream // the config file's, by name
	// retiring counts the clients a reload removed, shutting down.
	retiring sync.WaitGroup
}

// loadedUpstream is an upstream credential of the config file: its URI, and
// its client.
type loadedUpstream struct {
	uri    string
	client *mongopool.Client
}

// change is what a reload does to the config file's upstreams: the next
// set, the clients made for it, those it no longer holds.
type change struct {
	next    map[string]loadedUpstream
	made    []*mongopool.Client
	retired map[string]*mongopool.Client // by name
}

// plan makes the clients of the config file's upstreams (name to URI) that
// are new or whose URI changed, and returns the change; nothing changes
// until commit. On an error, the clients it made are closed.
func (u *upstreams) plan(uris map[string]string, maxPoolSize int) (*change, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	ch := &change{next: map[string]loadedUpstream{}, retired: map[string]*mongopool.Client{}}
	for name, uri := range uris {
		if _, dup := u.fixed[name]; dup {
			ch.abort()
			return nil, fmt.Errorf("-config: upstreams: %q is an -upstream-as too: give it once", name)
		}
		if cur, ok := u.loaded[name]; ok && cur.uri == uri {
			ch.next[name] = cur
			continue
		}
		c, err := u.make("-config: upstreams: "+name, name, uri, maxPoolSize)
		if err != nil {
			ch.abort()
			return nil, err
		}
		ch.made = append(ch.made, c)
		ch.next[name] = loadedUpstream{uri: uri, client: c}
	}
	for name, cur := range u.loaded {
		if next, ok := ch.next[name]; !ok || next.client != cur.client {
			ch.retired[name] = cur.client
		}
	}
	return ch, nil
}

// abort closes the clients ch made.
func (ch *change) abort() {
	for _, c := range ch.made {
		c.Close()
	}
}

// all returns the clients of every upstream credential by name, with the
// config file's as ch has them.
func (u *upstreams) all(ch *change) map[string]*mongopool.Client {
	m := maps.Clone(u.fixed)
	if m == nil {
		m = map[string]*mongopool.Client{}
	}
	for name, l := range ch.next {
		m[name] = l.client
	}
	return m
}

// commit makes ch the config file's upstreams, and shuts down the clients
// it retired on goroutines of their own, each within timeout: their
// operations under way end first.
func (u *upstreams) commit(ch *change, timeout time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.loaded = ch.next
	for _, c := range ch.retired {
		u.retiring.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			c.Shutdown(ctx)
		})
	}
}

// clients returns the clients of every upstream credential.
func (u *upstreams) clients() []*mongopool.Client {
	u.mu.Lock()
	defer u.mu.Unlock()
	cs := make([]*mongopool.Client, 0, len(u.fixed)+len(u.loaded))
	for _, c := range u.fixed {
		cs = append(cs, c)
	}
	for _, l := range u.loaded {
		cs = append(cs, l.client)
	}
	return cs
}

// close closes the config file's clients, once those retired are shut
// down.
func (u *upstreams) close() {
	u.retiring.Wait()
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, l := range u.loaded {
		l.client.Close()
	}
}
