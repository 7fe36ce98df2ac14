//go:build soak

package soak

import (
	"encoding/json"
	"strings"
	"sync"
	"time"
)

// decision is one line of a replica's decision log (--policy-decision-log=all), reduced to what
// matches it with a request.
type decision struct {
	ID                string
	Time              time.Time
	Action, Operation string
	Name              string // the load balancer's name (the current one for a delete)
	Allowed           bool
	Deny              string
}

// decisionLine is the part of a decision log line the soak reads.
type decisionLine struct {
	DecisionID string    `json:"decision_id"`
	Timestamp  time.Time `json:"timestamp"`
	Input      struct {
		Action       string `json:"action"`
		Operation    string `json:"operation"`
		LoadBalancer *struct {
			Name string `json:"name"`
		} `json:"load_balancer"`
		Current *struct {
			Name string `json:"name"`
		} `json:"current"`
	} `json:"input"`
	Result struct {
		Allowed bool              `json:"allowed"`
		Deny    []json.RawMessage `json:"deny"`
	} `json:"result"`
}

// decisionStore holds the decisions of every lifetime of the leader replicas, read from their
// decision logs as needed.
type decisionStore struct {
	mu    sync.Mutex
	byRun map[*lifetime][]decision
	total int
}

// latest returns the newest decision of lifetime l for action and operation on load balancer
// name taken at or before at (plus a millisecond of clock rounding).
func (ds *decisionStore) latest(l *lifetime, action, operation, name string, at time.Time) (decision, bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.ingest(l)
	list := ds.byRun[l]
	for i := len(list) - 1; i >= 0; i-- {
		d := list[i]
		if d.Action == action && d.Operation == operation && d.Name == name && !d.Time.After(at.Add(time.Millisecond)) {
			return d, true
		}
	}
	return decision{}, false
}

// ingest reads the lines l's decision log got since the last call; ds.mu is held.
func (ds *decisionStore) ingest(l *lifetime) {
	if ds.byRun == nil {
		ds.byRun = map[*lifetime][]decision{}
	}
	for _, line := range l.declTail.next() {
		var dl decisionLine
		if err := json.Unmarshal([]byte(line), &dl); err != nil {
			continue
		}
		d := decision{ID: dl.DecisionID, Time: dl.Timestamp, Action: dl.Input.Action, Operation: dl.Input.Operation, Allowed: dl.Result.Allowed}
		switch {
		case dl.Input.LoadBalancer != nil && dl.Input.LoadBalancer.Name != "":
			d.Name = dl.Input.LoadBalancer.Name
		case dl.Input.Current != nil:
			d.Name = dl.Input.Current.Name
		}
		var msgs []string
		for _, m := range dl.Result.Deny {
			var msg struct {
				Msg string `json:"msg"`
			}
			if json.Unmarshal(m, &msg) != nil || msg.Msg == "" {
				msg.Msg = string(m)
			}
			msgs = append(msgs, msg.Msg)
		}
		d.Deny = strings.Join(msgs, "; ")
		ds.byRun[l] = append(ds.byRun[l], d)
		ds.total++
	}
}

// count is the number of decisions read so far.
func (ds *decisionStore) count() int {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return ds.total
}
