package connection

import "time"

// LongPoll lets p's waits poll for up to a minute, past MaxBusyPoll, so
// that a test's poll ends with the reply it waits for.
func LongPoll(p *BusyPoller) {
	if p.Budget() > 0 {
		p.budget.Store(int64(time.Minute))
	}
}
