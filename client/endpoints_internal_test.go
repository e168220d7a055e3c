package client

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0}, {"0", 0}, {"-3", 0}, {"2", 2 * time.Second}, {" 7 ", 7 * time.Second},
		{"99999999", 24 * time.Hour}, {"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	} {
		if got := parseRetryAfter(tc.v, now); got != tc.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestJitterAndPick(t *testing.T) {
	for range 1000 {
		if d := jitter(time.Second); d < 500*time.Millisecond || d > time.Second {
			t.Fatalf("jitter(1s) = %v", d)
		}
	}
	now := time.Now()
	later, soon := now.Add(time.Hour), now.Add(time.Minute)
	if i := pickEndpoint([]time.Time{later, {}, {}}, 0); i != 1 {
		t.Fatalf("picked %d, want the first free from 0: 1", i)
	}
	if i := pickEndpoint([]time.Time{{}, later, {}}, 1); i != 2 {
		t.Fatalf("picked %d, want 2", i)
	}
	if i := pickEndpoint([]time.Time{later, soon, later}, 2); i != 1 {
		t.Fatalf("picked %d, want the one free soonest: 1", i)
	}
}
