package policy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Timings of WatchDir.
const (
	// dirSettle is how long WatchDir waits after a file event before reloading, so that one
	// kubelet symlink swap (several events) costs one reload.
	dirSettle = 100 * time.Millisecond
	// dirResync rereads the directory even without events, in case the watch missed a change
	// (e.g. the directory itself was replaced). Reading an unchanged revision costs a hash.
	dirResync = 10 * time.Second
)

// DirSource describes the directory dir as a source, without an object for events.
func DirSource(dir string) Source { return Source{Name: "dir " + dir} }

// ConfigMapSource describes cm as a source; events go to cm.
func ConfigMapSource(cm *corev1.ConfigMap) Source {
	return Source{Name: "configmap " + cm.Namespace + "/" + cm.Name, Object: cm}
}

// ReadDir reads the policy files of dir (not its subdirectories), following symlinks, as
// [Engine.Load] expects them: base name to content. Names starting with "." are skipped, so a
// mounted ConfigMap (whose files are symlinks into "..data") reads like the ConfigMap itself.
func ReadDir(dir string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read policy directory: %w", err)
	}
	files := map[string][]byte{}
	for _, ent := range entries {
		name := ent.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p) // follows symlinks
		if err != nil {
			return nil, fmt.Errorf("read policy directory: %w", err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read policy directory: %w", err)
		}
		files[name] = b
	}
	return files, nil
}

// SkippedSubdirs lists the subdirectories of dir that [ReadDir] does not load: every one whose
// name does not start with a dot (a mounted ConfigMap's "..data" and "..TIMESTAMP" are the
// kubelet's, not the operator's). An unreadable dir lists none; ReadDir reports that error.
func SkippedSubdirs(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, ent := range entries {
		if strings.HasPrefix(ent.Name(), ".") {
			continue
		}
		if fi, err := os.Stat(filepath.Join(dir, ent.Name())); err == nil && fi.IsDir() {
			out = append(out, ent.Name()+"/")
		}
	}
	return out
}

// WatchDir loads the policy files of dir into e and keeps reloading them on change until ctx
// is done. It watches the directory (not single files), so the kubelet's "..data" symlink swap
// of a mounted ConfigMap is seen; it also rereads the directory every 10 s.
//
// WatchDir returns after the first load; the watch runs in a goroutine.
//
// # Errors
//
// An error is returned when dir cannot be read or watched, or when its first revision is
// rejected (a *LoadError). Later rejections are logged and counted by Load, and the revision in
// force stays.
func WatchDir(ctx context.Context, e *Engine, dir string) error {
	src := DirSource(dir)
	files, err := ReadDir(dir)
	if err != nil {
		return err
	}
	if skipped := SkippedSubdirs(dir); len(skipped) > 0 {
		klog.InfoS("Policy directory has subdirectories that are not loaded: a policy revision is the directory's files only, as a ConfigMap is flat; move policies and data files up, or test fixtures into data files (docs/policy.md § Testing)",
			"dir", dir, "skipped", skipped)
	}
	if _, err := e.Load(ctx, files, src); err != nil {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch policy directory: %w", err)
	}
	if err := w.Add(dir); err != nil {
		_ = w.Close() // don't overwrite the error
		return fmt.Errorf("watch policy directory: %w", err)
	}
	go watchDir(ctx, e, dir, src, w)
	return nil
}

func watchDir(ctx context.Context, e *Engine, dir string, src Source, w *fsnotify.Watcher) {
	defer func() { _ = w.Close() }()
	resync := time.NewTicker(dirResync)
	defer resync.Stop()
	var settle <-chan time.Time
	reload := func() {
		files, err := ReadDir(dir)
		if err != nil {
			klog.ErrorS(err, "Policy reload failed, the revision in force stays", "source", src.Name, "revision", e.Revision())
			return
		}
		_, _ = e.Load(ctx, files, src) // Load logs, counts and reports rejections
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			klog.V(4).InfoS("Policy directory changed", "event", ev.String())
			settle = time.After(dirSettle)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			klog.ErrorS(err, "Watching the policy directory", "source", src.Name)
		case <-settle:
			settle = nil
			reload()
		case <-resync.C:
			reload()
		}
	}
}

// ConfigMapFiles returns the files of cm (Data and BinaryData) as [Engine.Load] expects them.
func ConfigMapFiles(cm *corev1.ConfigMap) map[string][]byte {
	files := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		files[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		files[k] = v
	}
	return files
}

// WatchConfigMap loads the policy ConfigMap namespace/name through the Kubernetes API and
// reloads it on every change until ctx is done. It runs an informer limited to that one object
// (field selector metadata.name), so a change is in force as soon as the watch event arrives.
//
// WatchConfigMap returns after the informer's first sync; the informer runs in the background.
// A ConfigMap that does not exist yet is loaded when it is created; until then the engine has
// no revision (or keeps its revision). Deleting the ConfigMap keeps the revision in force.
//
// # Errors
//
// An error is returned when ctx ends before the first sync, or when the ConfigMap exists and
// its first revision is rejected (a *LoadError); the informer is then stopped.
func WatchConfigMap(ctx context.Context, e *Engine, client kubernetes.Interface, namespace, name string) error {
	if namespace == "" || name == "" {
		return fmt.Errorf("watch policy configmap %q: want namespace/name", namespace+"/"+name)
	}
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	inf := factory.Core().V1().ConfigMaps().Informer()
	load := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Namespace != namespace || cm.Name != name {
			return
		}
		_, _ = e.Load(ctx, ConfigMapFiles(cm), ConfigMapSource(cm)) // Load logs, counts and reports
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    load,
		UpdateFunc: func(_, obj any) { load(obj) },
		DeleteFunc: func(any) {
			klog.InfoS("Policy ConfigMap deleted, the revision in force stays", "configmap", namespace+"/"+name, "revision", e.Revision())
		},
	})
	if err != nil {
		cancel()
		return fmt.Errorf("watch policy configmap %s/%s: %w", namespace, name, err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		factory.Shutdown()
		return fmt.Errorf("watch policy configmap %s/%s: %w", namespace, name, errors.Join(errors.New("first sync did not complete"), context.Cause(ctx)))
	}
	background := func() {
		go func() {
			defer cancel()
			<-ctx.Done()
			factory.Shutdown()
		}()
	}
	obj, exists, err := inf.GetStore().GetByKey(namespace + "/" + name)
	cm, ok := obj.(*corev1.ConfigMap)
	if err != nil || !exists || !ok {
		klog.InfoS("Policy ConfigMap not found yet, waiting for it", "configmap", namespace+"/"+name)
		background()
		return nil
	}
	if _, err := e.Load(ctx, ConfigMapFiles(cm), ConfigMapSource(cm)); err != nil {
		cancel()
		factory.Shutdown()
		return err
	}
	background()
	return nil
}
