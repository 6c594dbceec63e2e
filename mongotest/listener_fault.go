package mongotest

import "sync"

// acceptGate holds the accept loop while accepting is paused.
type acceptGate struct {
	mu sync.Mutex
	// resume is nil while the server accepts; while it is paused, it is the
	// channel that ResumeAccepting closes.
	resume chan struct{}
}

// PauseAccepting makes the server stop accepting connections until
// ResumeAccepting. The listener stays open, so the kernel still completes
// the TCP handshake of a client that connects (until its backlog is full):
// the client's connect succeeds, and then nothing answers, not even a TLS
// handshake, which is what a server too busy to accept looks like. A client
// must rely on its connect timeout. On a Network, likewise, dials succeed
// and their connections wait, however many. The connections held this way are served
// once accepting resumes, or closed by Close. Pausing a paused server does
// nothing.
func (s *Server) PauseAccepting() {
	g := &s.accept
	g.mu.Lock()
	if g.resume == nil {
		g.resume = make(chan struct{})
	}
	g.mu.Unlock()
}

// ResumeAccepting undoes PauseAccepting: the server accepts and serves the
// connections that waited, and new ones. Resuming a server that is not
// paused does nothing.
func (s *Server) ResumeAccepting() {
	g := &s.accept
	g.mu.Lock()
	if g.resume != nil {
		close(g.resume)
		g.resume = nil
	}
	g.mu.Unlock()
}

// waitAccepting returns once the server accepts connections: at once unless
// it is paused. It returns false if done (the end of the server's life)
// came meanwhile.
func (s *Server) waitAccepting(done <-chan struct{}) bool {
	for {
		s.accept.mu.Lock()
		resume := s.accept.resume
		s.accept.mu.Unlock()
		if resume == nil {
			return true
		}
		select {
		case <-resume:
		case <-done:
			return false
		}
	}
}
