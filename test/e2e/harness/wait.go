package harness

import (
	"time"
)

// pollInterval is how often WaitFor evaluates its condition.
const pollInterval = 100 * time.Millisecond

// WaitFor calls cond every 100 ms until it returns true, and fails the test (t.Fatal) when
// timeout passes first. An error from cond means "not yet": polling goes on, and the last error
// is part of the failure message. cond runs on the calling goroutine, so it may call t.Fatal
// itself to give up early.
func WaitFor(t T, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		if err != nil {
			lastErr = err
		}
		if time.Now().After(deadline) {
			if lastErr != nil {
				t.Fatalf("condition not met within %s; last error: %v", timeout, lastErr)
			}
			t.Fatalf("condition not met within %s", timeout)
		}
		time.Sleep(pollInterval)
	}
}
