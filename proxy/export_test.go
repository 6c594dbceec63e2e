package proxy

// SendingAhead returns how many client connections were found sending
// requests ahead of their replies.
func (p *Proxy) SendingAhead() int64 { return p.stats.sendingAhead.Load() }

// PausedUpstreams returns how many upstream clients are paused now.
func (p *Proxy) PausedUpstreams() int32 { return p.paused.Load() }
