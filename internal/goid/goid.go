// Package goid tells goroutines apart. The pool and its topology layer use it
// for one thing: a Close called from a callback they are running must not
// wait for the goroutine that runs the callback, which is the caller itself.
// Go offers no goroutine identity on purpose; this package reads the id from
// the first line of the calling goroutine's stack trace ("goroutine 42
// [running]:"), which costs a few microseconds, so it is only ever used off
// the hot paths: when a background goroutine starts, when a state change's
// events are delivered, and in Close.
package goid

import "runtime"

// Current returns the id of the calling goroutine; never 0.
func Current() uint64 {
	var buf [40]byte
	n := runtime.Stack(buf[:], false)
	const prefix = "goroutine "
	var id uint64
	for _, c := range buf[len(prefix):n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	if id == 0 {
		// The trace's format changed: fail loudly rather than make every
		// goroutine look the same.
		panic("goid: cannot read the goroutine id from the stack trace " + string(buf[:n]))
	}
	return id
}
