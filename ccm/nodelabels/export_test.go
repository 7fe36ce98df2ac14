package nodelabels

import (
	"context"
	"testing"

	"k8s.io/client-go/tools/cache"
)

// SyncNow syncs node name on the calling goroutine, as a worker would, after waiting for the
// node cache to sync. Tests use it instead of Run to sync one node deterministically.
func (c *Controller) SyncNow(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("node cache did not sync")
	}
	c.handle(ctx, name)
}

// Requeues returns how often node name was requeued with backoff since its last success.
func (c *Controller) Requeues(name string) int { return c.queue.NumRequeues(name) }
