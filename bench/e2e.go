package bench

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopool/mongopool"
)

// pingPoolSize is shape 6's maxPoolSize for both clients.
const pingPoolSize = 100

// pinger is a client that runs ping.
type pinger interface {
	ping(ctx context.Context) error
	close()
}

var pingCmd = bson.D{{Key: "ping", Value: 1}}

type mongopoolPinger struct{ p *mongopool.Pool }

func (m mongopoolPinger) ping(ctx context.Context) error {
	_, err := m.p.RunCommand(ctx, "admin", pingCmd)
	return err
}
func (m mongopoolPinger) close() { m.p.Close() }

type officialPinger struct {
	c  *mongo.Client
	db *mongo.Database
}

func (o officialPinger) ping(ctx context.Context) error {
	return o.db.RunCommand(ctx, pingCmd).Err()
}

func (o officialPinger) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o.c.Disconnect(ctx)
}

func newPinger(k Kind, addr string) (pinger, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	uri := fmt.Sprintf("mongodb://%s/?maxPoolSize=%d", addr, pingPoolSize)
	switch k {
	case Mongopool:
		p, err := mongopool.Open(ctx, uri)
		if err != nil {
			return nil, err
		}
		return mongopoolPinger{p}, nil
	case Official:
		c, err := mongo.Connect(options.Client().ApplyURI(uri))
		if err != nil {
			return nil, err
		}
		return officialPinger{c, c.Database("admin")}, nil
	}
	return nil, fmt.Errorf("bench: no client of kind %q", k)
}

// pings is the measured work: n pings from g goroutines.
func pings(c pinger, g int) func(n int) error {
	ctx := context.Background()
	return func(n int) error {
		return parallel(n, g, func(_, count int) error {
			for range count {
				if err := c.ping(ctx); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// endToEnd measures ping round trips through both clients against addr.
func (s *Suite) endToEnd(server, addr string, g int) error {
	kinds := []Kind{Mongopool, Official}
	clients := make(map[Kind]pinger, 2)
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	for _, k := range kinds {
		c, err := newPinger(k, addr)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		clients[k] = c
		// Warm: establish the connections the goroutines will use.
		if err := pings(c, g)(4 * g); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	ms, err := s.alternate(kinds, func(k Kind) func(n int) error { return pings(clients[k], g) })
	if err != nil {
		return err
	}
	cas := fmt.Sprintf("%s, %d goroutines", server, g)
	for _, k := range kinds {
		m := ms[k]
		s.row("6 ping", cas, k, append([]Fig{{"pings/s", fmt.Sprintf("%.0f", 1e9/m.NsOp)}}, measureFigs(m)...)...)
	}
	mp, off := ms[Mongopool], ms[Official]
	s.check("6 ping", cas+": throughput >= official, fewer allocs per round trip",
		fmt.Sprintf("%.0f vs %.0f pings/s (x%.2f); %.1f vs %.1f allocs/op",
			1e9/mp.NsOp, 1e9/off.NsOp, off.NsOp/mp.NsOp, mp.AllocsOp, off.AllocsOp),
		mp.NsOp <= off.NsOp && mp.AllocsOp < off.AllocsOp)
	return nil
}

// EndToEnd is shape 6: ping round trips through mongopool.Open's pool and
// through a mongo.Client, against the test server and FerretDB.
func (s *Suite) EndToEnd() error {
	servers := []struct{ name, addr string }{{"test server", s.server.Addr()}}
	if s.ferret != nil {
		servers = append(servers, struct{ name, addr string }{"FerretDB", s.ferret.Addr()})
	}
	for _, srv := range servers {
		for _, g := range s.PingGoroutines {
			s.progress("shape 6: ping, %s, %d goroutines", srv.name, g)
			if err := s.endToEnd(srv.name, srv.addr, g); err != nil {
				return err
			}
		}
	}
	s.note("Shape 6: allocations are the whole process's, the in-process server's included; " +
		"both clients talk to the same server, so the difference is the clients'.")
	return nil
}
