package nodejs

import "testing"

func TestRecentEnough(t *testing.T) {
	for v, want := range map[string]bool{"v20.19.0": true, "v20.18.9": false, "v22.1.0": true, "v18.20.0": false, "20": false, "vx.y": false} {
		if got := RecentEnough(v); got != want {
			t.Errorf("RecentEnough(%q) = %v, want %v", v, got, want)
		}
	}
}
