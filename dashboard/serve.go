package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// streamWriteTimeout bounds the writing of one frame of /events, so that a
// client that stops reading does not hold its stream for ever.
const streamWriteTimeout = 10 * time.Second

// servePage serves the page itself.
func (d *Dashboard) servePage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeFileFS(w, r, static, "static/index.html")
}

// serveSnapshot serves one snapshot as JSON, with every event kept.
func (d *Dashboard) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	s, _ := d.snapshot(time.Now(), 0, 0)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(s) // an error is the client's going away
}

// serveEvents streams snapshots as server-sent events until the client goes
// away or the dashboard is closed. Each frame lists the events that came
// since the previous one.
func (d *Dashboard) serveEvents(w http.ResponseWriter, r *http.Request) {
	if d.streams.Add(1) > MaxStreams {
		d.streams.Add(-1)
		http.Error(w, "dashboard: too many /events streams open at once", http.StatusServiceUnavailable)
		return
	}
	defer d.streams.Add(-1)
	select {
	case <-d.done:
		http.Error(w, "dashboard: closed", http.StatusServiceUnavailable)
		return
	default:
	}

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a proxy in front must not hold frames back
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return // the headers are the whole answer
	}

	// The client reconnects a second after the stream ends.
	if !d.send(w, rc, []byte("retry: 1000\n\n")) {
		return
	}
	tick := time.NewTicker(d.cfg.interval)
	defer tick.Stop()
	var after uint64
	var buf []byte
	for {
		var s snapshot
		s, after = d.snapshot(time.Now(), after, streamEventsLimit)
		js, err := json.Marshal(s)
		if err != nil {
			return // cannot happen: the snapshot has no value JSON refuses
		}
		buf = append(append(append(buf[:0], "data: "...), js...), "\n\n"...)
		if !d.send(w, rc, buf) {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-d.done:
			return
		case <-tick.C:
		}
	}
}

// send writes a frame and flushes it; it reports whether the client took it.
func (d *Dashboard) send(w http.ResponseWriter, rc *http.ResponseController, frame []byte) bool {
	if err := rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return false
	}
	if _, err := w.Write(frame); err != nil {
		return false
	}
	return rc.Flush() == nil
}
