package embedded

import (
	"net"
	"os"
	"testing"
)

// Start returns a server that accepts connections at once, at the address
// its URI names; Close stops it, removes its data and may be called again.
func TestStartAndClose(t *testing.T) {
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "mongodb://" + s.Addr() + "/"; s.URI() != want {
		t.Errorf("URI %q, want %q", s.URI(), want)
	}
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := os.Stat(s.dir); err != nil {
		t.Fatalf("the data directory: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("the data directory after Close: %v, want it gone", err)
	}
	if c, err := net.Dial("tcp", s.Addr()); err == nil {
		c.Close()
		t.Error("the server still accepts connections after Close")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
