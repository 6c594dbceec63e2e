package topology

import (
	"testing"
	"time"
)

func TestRTTAverage(t *testing.T) {
	var r roundTrips
	if _, ok := r.Average(); ok {
		t.Fatal("a roundTrips without samples has an average")
	}
	r.Add(10 * time.Millisecond)
	if avg, ok := r.Average(); !ok || avg != 10*time.Millisecond {
		t.Fatalf("first sample: average %v, %v; want 10ms, true", avg, ok)
	}
	r.Add(20 * time.Millisecond)
	if avg, _ := r.Average(); avg != 12*time.Millisecond {
		t.Fatalf("second sample: average %v; want 12ms", avg)
	}
}

func TestRTTMinOverTheLastTenSamples(t *testing.T) {
	var r roundTrips
	r.Add(time.Millisecond)
	if m := r.Min(); m != 0 {
		t.Fatalf("one sample: min %v; want 0 until two samples", m)
	}
	r.Add(5 * time.Millisecond)
	if m := r.Min(); m != time.Millisecond {
		t.Fatalf("two samples: min %v; want 1ms", m)
	}
	// Nine more samples push the 1 ms one out of the window.
	for i := range 9 {
		r.Add(time.Duration(10+i) * time.Millisecond)
	}
	if m := r.Min(); m != 5*time.Millisecond {
		t.Fatalf("after the 1ms sample left the window: min %v; want 5ms", m)
	}
	// Many more keep the ring right.
	for i := range 1000 {
		r.Add(time.Duration(100+i%7) * time.Millisecond)
	}
	r.Add(2 * time.Millisecond)
	if m := r.Min(); m != 2*time.Millisecond {
		t.Fatalf("after 1000 samples and a 2ms one: min %v; want 2ms", m)
	}
	for range 10 {
		r.Add(50 * time.Millisecond)
	}
	if m := r.Min(); m != 50*time.Millisecond {
		t.Fatalf("after ten 50ms samples: min %v; want 50ms", m)
	}
	r.Reset()
	if _, ok := r.Average(); ok || r.Min() != 0 {
		t.Fatal("Reset kept samples")
	}
}
