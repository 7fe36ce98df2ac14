package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultWatchInterval is how often Watch checks the file when no interval is given.
const DefaultWatchInterval = 5 * time.Second

// Watched is a plugin loaded from a file and reloaded when the file's content changes. It has
// the call methods of Plugin and is safe for concurrent use.
//
// Here's an example:
//
//	w, err := plugins.Watch(ctx, "/plugins/labels.wasm.gz", plugins.Options{}, 0, func(err error) {
//		if err != nil {
//			klog.ErrorS(err, "Plugin reload failed; keeping the previous revision")
//		}
//	})
//	if err != nil {
//		return err
//	}
//	defer w.Close(ctx)
//	labels, err := w.NodeLabels(ctx, in)
//
// # Notes
//
//   - The file is read every interval and compared by SHA-256, so a ConfigMap update (an atomic
//     symlink swap by the kubelet) is seen within the interval plus the kubelet's sync delay.
//   - A new revision is loaded completely (compile, checks, first instance) before it replaces
//     the current one. A revision that fails to load, or that drops a hook the current one
//     exports, is refused: the current revision keeps serving, notify gets the error, and the
//     same bytes are not tried again.
//   - A replaced revision is closed after a grace period long enough for calls already running
//     on it to finish.
type Watched struct {
	path    string
	opts    Options
	notify  func(error)
	cur     atomic.Pointer[revision]
	stop    context.CancelFunc
	done    chan struct{}
	closeMu sync.Mutex
	closed  bool
}

type revision struct {
	p    *Plugin
	hash string // hex SHA-256 of the file as read
}

// Watch loads the plugin at path and checks the file every interval (DefaultWatchInterval when
// zero) until Close. notify, when not nil, is called after every reload attempt: with nil after
// a successful reload, with the error after a refused one; it runs on the watch goroutine.
//
// # Errors
//
// As for Load, for the first revision.
func Watch(ctx context.Context, path string, o Options, interval time.Duration, notify func(error)) (*Watched, error) {
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	if notify == nil {
		notify = func(error) {}
	}
	raw, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("load plugin %s: %w", path, err)
	}
	rev, err := loadRevision(ctx, path, raw, o)
	if err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w := &Watched{path: path, opts: o, notify: notify, stop: stop, done: make(chan struct{})}
	w.cur.Store(rev)
	go w.loop(wctx, interval)
	return w, nil
}

func loadRevision(ctx context.Context, path string, raw []byte, o Options) (*revision, error) {
	sum := sha256.Sum256(raw)
	wasm, err := decompress(path, raw)
	if err != nil {
		return nil, fmt.Errorf("load plugin %s: %w", path, err)
	}
	p, err := LoadBytes(ctx, path, wasm, o)
	if err != nil {
		return nil, err
	}
	return &revision{p: p, hash: hex.EncodeToString(sum[:])}, nil
}

func (w *Watched) loop(ctx context.Context, interval time.Duration) {
	defer close(w.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	refused := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		raw, err := readFile(w.path)
		if err != nil {
			if refused != "read" {
				w.notify(fmt.Errorf("reload plugin %s: %w (keeping revision %.12s)", w.path, err, w.cur.Load().hash))
			}
			refused = "read"
			continue
		}
		sum := sha256.Sum256(raw)
		hash := hex.EncodeToString(sum[:])
		if hash == w.cur.Load().hash || hash == refused {
			continue
		}
		if err := w.reload(ctx, raw); err != nil {
			refused = hash
			w.notify(fmt.Errorf("reload plugin %s: %w (keeping revision %.12s)", w.path, err, w.cur.Load().hash))
			continue
		}
		refused = ""
		w.notify(nil)
	}
}

func (w *Watched) reload(ctx context.Context, raw []byte) error {
	rev, err := loadRevision(ctx, w.path, raw, w.opts)
	if err != nil {
		return err
	}
	old := w.cur.Load()
	for _, h := range old.p.Hooks() {
		if !rev.p.Has(h) {
			_ = rev.p.Close(ctx) // refused
			return fmt.Errorf("new revision %.12s does not export hook %s", rev.hash, h)
		}
	}
	w.closeMu.Lock()
	defer w.closeMu.Unlock()
	if w.closed {
		_ = rev.p.Close(ctx)
		return ErrClosed
	}
	w.cur.Store(rev)
	w.retire(old.p)
	return nil
}

// retire closes p once calls that may have started on it are over: a call waits at most
// CallTimeout, plus the time to create an instance.
func (w *Watched) retire(p *Plugin) {
	grace := p.opts.CallTimeout + max(10*p.opts.CallTimeout, minInstantiateTimeout) + time.Second
	time.AfterFunc(grace, func() { _ = p.Close(context.Background()) })
}

// Revision returns the hex SHA-256 of the file content of the revision serving calls.
func (w *Watched) Revision() string { return w.cur.Load().hash }

// Plugin returns the revision serving calls now.
func (w *Watched) Plugin() *Plugin { return w.cur.Load().p }

// Hooks returns the hooks of the current revision (a reload never drops one).
func (w *Watched) Hooks() []string { return w.cur.Load().p.Hooks() }

// NodeLabels calls the current revision; see Plugin.NodeLabels.
func (w *Watched) NodeLabels(ctx context.Context, in NodeInput) (map[string]string, error) {
	return w.cur.Load().p.NodeLabels(ctx, in)
}

// LoadBalancerName calls the current revision; see Plugin.LoadBalancerName.
func (w *Watched) LoadBalancerName(ctx context.Context, in LoadBalancerNameInput) (string, error) {
	return w.cur.Load().p.LoadBalancerName(ctx, in)
}

// Close stops watching and closes the current revision; revisions already replaced close at
// the end of their grace period. Close is idempotent.
func (w *Watched) Close(ctx context.Context) error {
	w.closeMu.Lock()
	if w.closed {
		w.closeMu.Unlock()
		return nil
	}
	w.closed = true
	w.closeMu.Unlock()
	w.stop()
	<-w.done
	return w.cur.Load().p.Close(ctx)
}
