package executor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// Action polling of the shared waiter.
const (
	// DefaultActionPollInterval is the first wait of a polling round when Options.ActionPollInterval
	// is 0 (HCLOUD_POLL_INTERVAL's default).
	DefaultActionPollInterval = 250 * time.Millisecond
	// maxActionPollInterval caps the doubling wait between rounds (or the interval, if larger).
	maxActionPollInterval = 2 * time.Second
	// actionsPerPoll is how many action IDs one GET /actions carries (the API's largest page).
	actionsPerPoll = 50
)

// actionWaiter waits for many actions with shared polls: one goroutine reads every pending
// action with GET /actions?id=…&id=… (50 per request) each round, so N concurrent waits cost
// about ceil(N/50) requests per round instead of N. The wait between rounds doubles while
// actions are pending (up to 2 s), so a burst of waits (the Services of a node sync round)
// shares few polls; a caller that blocks something on its action (waitSoon, kick) cuts the
// current wait to the first interval. The zero value is ready to use.
type actionWaiter struct {
	interval time.Duration // 0 means DefaultActionPollInterval

	mu      sync.Mutex
	pending map[int64][]chan error
	polling bool
	wake    chan struct{} // kick: poll within the first interval (buffered 1; see wakeCh)
}

// wakeCh returns the kick channel, made on first use.
func (w *actionWaiter) wakeCh() chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wake == nil {
		w.wake = make(chan struct{}, 1)
	}
	return w.wake
}

// kick makes the poller's next round come at most the first interval from now: something is
// blocked on a pending action (the next request of a detached run, or a call waiting in
// Settle), so latency matters more than sharing the round with later waits.
func (w *actionWaiter) kick() {
	select {
	case w.wakeCh() <- struct{}{}:
	default: // a kick is pending already
	}
}

// waitSoon is wait, with a kick once a is registered (see kick).
func (w *actionWaiter) waitSoon(ctx context.Context, client *hcloud.Client, a *hcloud.Action) error {
	return w.waitWith(ctx, client, a, true)
}

// wait returns when a has finished: nil on success, the action's error when it failed, or an
// error when it cannot be read or ctx ends first.
func (w *actionWaiter) wait(ctx context.Context, client *hcloud.Client, a *hcloud.Action) error {
	return w.waitWith(ctx, client, a, false)
}

// waitWith is wait, with a kick when soon.
func (w *actionWaiter) waitWith(ctx context.Context, client *hcloud.Client, a *hcloud.Action, soon bool) error {
	switch {
	case a == nil || a.Status == hcloud.ActionStatusSuccess:
		return nil
	case a.Status == hcloud.ActionStatusError:
		return a.Error()
	}
	ch := make(chan error, 1)
	w.mu.Lock()
	if w.pending == nil {
		w.pending = map[int64][]chan error{}
	}
	w.pending[a.ID] = append(w.pending[a.ID], ch)
	if !w.polling {
		w.polling = true
		go w.poll(client)
	}
	w.mu.Unlock()
	if soon {
		w.kick()
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		w.forget(a.ID, ch)
		return fmt.Errorf("waiting for action %d: %w", a.ID, ctx.Err())
	}
}

// forget drops a waiter that gave up.
func (w *actionWaiter) forget(id int64, ch chan error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending[id] = slices.DeleteFunc(w.pending[id], func(c chan error) bool { return c == ch })
	if len(w.pending[id]) == 0 {
		delete(w.pending, id)
	}
}

// poll runs rounds until nothing is pending (TestActionWaiter_backoff).
func (w *actionWaiter) poll(client *hcloud.Client) {
	first := w.interval
	if first <= 0 {
		first = DefaultActionPollInterval
	}
	delay := first
	maxDelay := max(maxActionPollInterval, delay)
	for {
		w.sleep(delay, first)
		delay = min(2*delay, maxDelay)
		w.mu.Lock()
		ids := slices.Sorted(maps.Keys(w.pending))
		if len(ids) == 0 {
			w.polling = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		results := w.round(client, ids)
		w.mu.Lock()
		for id, err := range results {
			for _, ch := range w.pending[id] {
				ch <- err
			}
			delete(w.pending, id)
		}
		w.mu.Unlock()
	}
}

// sleep waits d, or until first after a kick if that comes sooner.
func (w *actionWaiter) sleep(d, first time.Duration) {
	wake := w.wakeCh()
	deadline := time.Now().Add(d)
	for {
		timer := time.NewTimer(time.Until(deadline))
		select {
		case <-timer.C:
			return
		case <-wake:
			timer.Stop()
			if soon := time.Now().Add(first); soon.Before(deadline) {
				deadline = soon
			}
		}
	}
}

// round reads the actions ids and returns the outcome of each finished (or unreadable) one.
func (w *actionWaiter) round(client *hcloud.Client, ids []int64) map[int64]error {
	results := map[int64]error{}
	for chunk := range slices.Chunk(ids, actionsPerPoll) {
		actions, err := client.Action.AllWithOpts(context.Background(), hcloud.ActionListOpts{
			ListOpts: hcloud.ListOpts{PerPage: actionsPerPoll}, ID: chunk,
		})
		if err != nil {
			for _, id := range chunk {
				results[id] = fmt.Errorf("polling action %d: %w", id, err)
			}
			continue
		}
		seen := make(map[int64]bool, len(actions))
		for _, a := range actions {
			seen[a.ID] = true
			switch a.Status {
			case hcloud.ActionStatusSuccess:
				results[a.ID] = nil
			case hcloud.ActionStatusError:
				results[a.ID] = a.Error()
			}
		}
		for _, id := range chunk {
			if !seen[id] {
				results[id] = fmt.Errorf("action %d not found", id)
			}
		}
	}
	return results
}
