//go:build !unix

package sockio

import "net"

// rawSocket is empty where the system calls are not used: Defer writes at
// once.
type rawSocket struct{}

func (r *rawSocket) init(*Conn, net.Conn) {}
func (r *rawSocket) ok() bool             { return false }
func (r *rawSocket) readable() bool       { return false }
func (r *rawSocket) writeRead([]byte) (int, error) {
	panic("sockio: writeRead without a socket")
}
