//go:build unix

package sockio

// EmptyReads returns the reads after a kept message's write that found
// the socket empty.
func (c *Conn) EmptyReads() int { return c.raw.emptyReads }
