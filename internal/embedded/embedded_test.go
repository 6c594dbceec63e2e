package embedded

import (
	"net"
	"testing"
)

func TestStartAndClose(t *testing.T) {
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	s.Close()
	t.Log(s.URI())
}
