package loadbalancer

import (
	"errors"
	"testing"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
)

func TestDenialCache(t *testing.T) {
	denied := &gate.DeniedError{Denied: 1, Of: 2, Messages: "no: for create(web)"}
	failed := &gate.DeniedError{Denied: 1, Of: 1, Failed: 1, Messages: "policy evaluation failed"}
	tests := []struct {
		name    string
		record  error
		digest  string // of the record; the lookup uses "d1"
		after   time.Duration
		maxAge  time.Duration
		wantHit bool
	}{
		{name: "An unchanged retry gets the denial back", record: denied, digest: "d1", after: time.Minute, maxAge: time.Hour, wantHit: true},
		{name: "A changed input is decided again", record: denied, digest: "d0", after: time.Minute, maxAge: time.Hour},
		{name: "A denial older than maxAge is decided again (the load balancer is read again)", record: denied, digest: "d1", after: time.Hour, maxAge: time.Hour},
		{name: "A failed evaluation is not remembered", record: failed, digest: "d1", after: time.Second, maxAge: time.Hour},
		{name: "An error that is not a denial is not remembered", record: errors.New("locked"), digest: "d1", after: time.Second, maxAge: time.Hour},
		{name: "Success forgets", record: nil, digest: "d1", after: time.Second, maxAge: time.Hour},
		{name: "An input without digest is not remembered", record: denied, digest: "", after: time.Second, maxAge: time.Hour},
		{name: "maxAge 0 remembers nothing", record: denied, digest: "d1", maxAge: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC)
			c := newDenialCache(tc.maxAge)
			c.now = func() time.Time { return now }
			c.record("uid", "d1", denied) // an earlier denial that the record below replaces or forgets
			c.record("uid", tc.digest, tc.record)
			now = now.Add(tc.after)
			got := c.get("uid", "d1")
			if hit := got != nil; hit != tc.wantHit {
				t.Fatalf("get = %v, want hit %v", got, tc.wantHit)
			}
			if tc.wantHit && !errors.Is(got, tc.record) {
				t.Errorf("get = %v, want the recorded error %v", got, tc.record)
			}
		})
	}
}

func TestDenialCache_prunesExpired(t *testing.T) {
	now := time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC)
	c := newDenialCache(time.Hour)
	c.now = func() time.Time { return now }
	c.record("a", "d", &gate.DeniedError{Denied: 1, Of: 1})
	now = now.Add(2 * time.Hour)
	c.record("b", "d", &gate.DeniedError{Denied: 1, Of: 1})
	if _, ok := c.entries["a"]; ok || len(c.entries) != 1 {
		t.Errorf("entries = %v, want only b: expired entries are dropped", c.entries)
	}
}
