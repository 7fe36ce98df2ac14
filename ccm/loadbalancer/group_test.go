package loadbalancer_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// groupEnv is an env whose load balancers list Services from idx, the informer's stand-in.
type groupEnv struct {
	*env
	idx cache.Indexer
}

func newGroupEnv(t *testing.T, opts ...envOption) *groupEnv {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	opts = append(opts, withLBOption(func(o *loadbalancer.Options) { o.Services = corelisters.NewServiceLister(idx) }))
	return &groupEnv{env: newEnv(t, opts...), idx: idx}
}

var groupT0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

// groupMember is a Service of group (none: "") in namespace shop, created age minutes after
// groupT0, with the ports (node port 30000+port+age, so two members' listeners differ).
func groupMember(name string, age int, group string, ports []int32, tweaks ...serviceTweak) *corev1.Service {
	svc := newService(name, tweaks...)
	svc.UID = types.UID("uid-" + name)
	svc.CreationTimestamp = metav1.NewTime(groupT0.Add(time.Duration(age) * time.Minute))
	if group != "" {
		svc.Annotations[string(annotation.LBGroup)] = group
	}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprint("p", p), Protocol: corev1.ProtocolTCP, Port: p, NodePort: 30000 + p + int32(age)})
	}
	return svc
}

// add puts the Services in the lister.
func (g *groupEnv) add(svcs ...*corev1.Service) {
	for _, s := range svcs {
		if err := g.idx.Update(s); err != nil {
			g.t.Fatal(err)
		}
	}
}

// remove marks svc deleted in the lister (deletionTimestamp set, as while its finalizer runs)
// and calls EnsureLoadBalancerDeleted.
func (g *groupEnv) remove(svc *corev1.Service) error {
	g.t.Helper()
	now := metav1.NewTime(groupT0)
	svc = svc.DeepCopy()
	svc.DeletionTimestamp = &now
	g.add(svc)
	return g.lbs.EnsureLoadBalancerDeleted(context.Background(), clusterName, svc)
}

// lbs returns every load balancer in the emulator.
func (g *groupEnv) all() []*hcloud.LoadBalancer {
	g.t.Helper()
	lbs, err := g.client.LoadBalancer.All(context.Background())
	if err != nil {
		g.t.Fatal(err)
	}
	return lbs
}

func listenPortsOf(lb *hcloud.LoadBalancer) []int {
	out := []int{}
	for _, s := range lb.Services {
		out = append(out, s.ListenPort)
	}
	slices.Sort(out)
	return out
}

// lastGroup is the input.group of the last decision.
func (g *groupEnv) lastGroup() *input.Group {
	g.decider.mu.Lock()
	defer g.decider.mu.Unlock()
	if len(g.decider.inputs) == 0 {
		return nil
	}
	return g.decider.inputs[len(g.decider.inputs)-1].Group
}

func TestGroup_ThreeMembersShareOneLoadBalancer(t *testing.T) {
	g := newGroupEnv(t)
	a := groupMember("a", 0, "web", []int32{80, 443})
	b := groupMember("b", 1, "web", []int32{8080})
	c := groupMember("c", 2, "web", []int32{22})
	g.add(a, b, c)
	stA := g.mustEnsure(a)
	lb := g.onlyLB()
	if lb.Name != "kubernetes-group-web" || !reflect.DeepEqual(lb.Labels, lbgroup.GroupDesiredLabels("web", clusterName, "shop")) {
		t.Errorf("name %q labels %v, want the group's name and labels with its home namespace (never %s)", lb.Name, lb.Labels, lbplan.LabelServiceUID)
	}
	if got := listenPortsOf(lb); !reflect.DeepEqual(got, []int{22, 80, 443, 8080}) || len(lb.Targets) != 2 {
		t.Errorf("listeners %v targets %d, want the union of the members' ports and both nodes", got, len(lb.Targets))
	}
	want := &input.Group{Name: "web", Namespace: "shop", Leader: input.ServiceRef{Namespace: "shop", Name: "a"},
		Members: []input.GroupMember{
			{Namespace: "shop", Name: "a", Ports: []int{80, 443}}, {Namespace: "shop", Name: "b", Ports: []int{8080}}, {Namespace: "shop", Name: "c", Ports: []int{22}},
		}, Capacity: input.GroupCapacity{Type: "lb11", MaxServices: 5, Used: 4}}
	if got := g.lastGroup(); !reflect.DeepEqual(got, want) {
		t.Errorf("input.group = %+v, want %+v", got, want)
	}
	g.emu.ResetRequests()
	for _, m := range []*corev1.Service{b, c} {
		st := g.mustEnsure(m)
		if !reflect.DeepEqual(st, stA) || len(st.Ingress) == 0 {
			t.Errorf("status of %s = %v, want the group's %v", m.Name, st.Ingress, stA.Ingress)
		}
	}
	if n := g.emu.MutatingRequests(); n != 0 {
		t.Errorf("the other members' syncs made %d mutating requests: %v", n, g.emu.Counts())
	}
	if err := g.lbs.UpdateLoadBalancer(context.Background(), clusterName, b, g.nodes[:1]); err != nil {
		t.Fatal(err)
	}
	if lb := g.onlyLB(); len(lb.Targets) != 1 || len(lb.Services) != 4 {
		t.Errorf("after an update with one node: %d targets %d listeners", len(lb.Targets), len(lb.Services))
	}
	st, exists, err := g.lbs.GetLoadBalancer(context.Background(), clusterName, c)
	if err != nil || !exists || !reflect.DeepEqual(st, stA) {
		t.Errorf("GetLoadBalancer() = %v, %v, %v", st, exists, err)
	}
}

func TestGroup_PortConflict(t *testing.T) {
	g := newGroupEnv(t)
	older := groupMember("older", 0, "web", []int32{443})
	newer := groupMember("newer", 1, "web", []int32{443, 8443})
	newest := groupMember("newest", 2, "web", []int32{443})
	g.add(older, newer, newest)
	g.mustEnsure(newer)
	lb := g.onlyLB()
	if got := listenPortsOf(lb); !reflect.DeepEqual(got, []int{443, 8443}) {
		t.Fatalf("listeners %v", got)
	}
	for _, s := range lb.Services {
		if s.ListenPort == 443 && s.DestinationPort != 30443 {
			t.Errorf("port 443 goes to %d, want the older member's node port 30443", s.DestinationPort)
		}
	}
	want := "Warning LoadBalancerGroupPortConflict port 443 is already served by shop/older in load balancer group web; shop/newer's other ports are served"
	if ev := g.events(); !slices.Contains(ev, want) {
		t.Errorf("events %v, want %q", ev, want)
	}
	_, err := g.ensure(newest)
	if !errors.Is(err, loadbalancer.ErrGroupNotServed) || !strings.Contains(err.Error(), "port 443 is already served by shop/older") {
		t.Errorf("a member without a port left: %v, want ErrGroupNotServed naming the port and its owner", err)
	}
}

func TestGroup_SettingConflict(t *testing.T) {
	g := newGroupEnv(t)
	leader := groupMember("oldest", 0, "web", []int32{80}, withAnnotation(annotation.LBType, "lb11"))
	other := groupMember("other", 1, "web", []int32{81}, withAnnotation(annotation.LBType, "lb21"), withAnnotation(annotation.LBAlgorithmType, "least_connections"))
	g.add(leader, other)
	g.mustEnsure(other)
	lb := g.onlyLB()
	if lb.LoadBalancerType.Name != "lb11" || lb.Algorithm.Type != hcloud.LoadBalancerAlgorithmTypeRoundRobin {
		t.Errorf("type %s algorithm %s, want the leader's lb11 and the default", lb.LoadBalancerType.Name, lb.Algorithm.Type)
	}
	want := `Warning LoadBalancerGroupSettingConflict load-balancer.hetzner.cloud/type: "lb21" here, "lb11" on the leader shop/oldest (in force); load-balancer.hetzner.cloud/algorithm-type: "least_connections" here, not set on the leader shop/oldest (in force)`
	if ev := g.events(); !slices.Contains(ev, want) {
		t.Errorf("events %v, want %q", ev, want)
	}
}

func TestGroup_CapacityExceeded(t *testing.T) {
	g := newGroupEnv(t)
	a := groupMember("oldest", 0, "web", []int32{1, 2, 3, 4})
	b := groupMember("svc", 1, "web", []int32{5, 6})
	c := groupMember("small", 2, "web", []int32{7})
	g.add(a, b, c)
	_, err := g.ensure(b)
	if !errors.Is(err, loadbalancer.ErrGroupNotServed) {
		t.Fatalf("EnsureLoadBalancer() = %v, want ErrGroupNotServed", err)
	}
	if got := listenPortsOf(g.onlyLB()); !reflect.DeepEqual(got, []int{1, 2, 3, 4, 7}) {
		t.Errorf("listeners %v, want the older members' and the one that fits, none of the refused member's", got)
	}
	want := "Warning LoadBalancerGroupCapacityExceeded load balancer group web (type lb11) serves at most 5 listeners; shop/svc needs 2 more (6 in all). Type lb21 (15) would fit: set load-balancer.hetzner.cloud/type on the leader shop/oldest."
	if ev := g.events(); !slices.Contains(ev, want) {
		t.Errorf("events %v, want %q", ev, want)
	}
	if got := g.lastGroup(); got == nil || len(got.Members[1].Ports) != 0 || got.Capacity.Used != 5 {
		t.Errorf("input.group = %+v, want the refused member without ports and 5 used", got)
	}
}

func TestGroup_DeleteOneByOne(t *testing.T) {
	for _, protected := range []bool{false, true} {
		t.Run(fmt.Sprint("protected=", protected), func(t *testing.T) {
			g := newGroupEnv(t)
			a := groupMember("a", 0, "web", []int32{80})
			b := groupMember("b", 1, "web", []int32{81, 82})
			c := groupMember("c", 2, "web", []int32{80, 83}) // 80 is a's
			g.add(a, b, c)
			g.mustEnsure(a)
			if protected {
				if _, _, err := g.client.LoadBalancer.ChangeProtection(context.Background(), g.onlyLB(), hcloud.LoadBalancerChangeProtectionOpts{Delete: hcloud.Ptr(true)}); err != nil {
					t.Fatal(err)
				}
			}
			steps := []struct {
				svc  *corev1.Service
				want []int
			}{{b, []int{80, 83}}, {a, []int{80, 83}}, {c, nil}}
			for _, st := range steps {
				if err := g.remove(st.svc); err != nil {
					t.Fatalf("delete %s: %v", st.svc.Name, err)
				}
				lbs := g.all()
				if st.want == nil && !protected {
					if len(lbs) != 0 {
						t.Errorf("after the last member: %d load balancers, want 0", len(lbs))
					}
					continue
				}
				if len(lbs) != 1 {
					t.Fatalf("after deleting %s: %d load balancers", st.svc.Name, len(lbs))
				}
				if st.want != nil && !reflect.DeepEqual(listenPortsOf(lbs[0]), st.want) {
					t.Errorf("after deleting %s: listeners %v, want %v", st.svc.Name, listenPortsOf(lbs[0]), st.want)
				}
			}
			if protected && !hasEvent(g.events(), "Warning DeleteProtected") {
				t.Errorf("no DeleteProtected event")
			}
		})
	}
}

func TestGroup_NonMemberNamingTheLoadBalancerIsRefused(t *testing.T) {
	g := newGroupEnv(t)
	a := groupMember("a", 0, "web", []int32{80})
	g.add(a)
	g.mustEnsure(a)
	outsiders := []*corev1.Service{
		groupMember("plain", 1, "", []int32{81}, withAnnotation(annotation.LBName, "kubernetes-group-web")),
		groupMember("other", 1, "api", []int32{81}, withAnnotation(annotation.LBName, "kubernetes-group-web")),
	}
	for _, s := range outsiders {
		g.add(s)
		g.emu.ResetRequests()
		_, err := g.ensure(s)
		var reserved *lbservice.ReservedNameError
		if !errors.As(err, &reserved) || reserved.Group != "web" {
			t.Errorf("%s: EnsureLoadBalancer() = %v, want a ReservedNameError naming group web", s.Name, err)
		}
		if n := g.emu.MutatingRequests(); n != 0 {
			t.Errorf("%s: %d mutating requests", s.Name, n)
		}
		if err := g.lbs.EnsureLoadBalancerDeleted(context.Background(), clusterName, s); err != nil {
			t.Errorf("%s: EnsureLoadBalancerDeleted() = %v", s.Name, err)
		}
	}
	if lb := g.onlyLB(); !reflect.DeepEqual(listenPortsOf(lb), []int{80}) {
		t.Errorf("listeners %v: the outsiders changed the group's load balancer", listenPortsOf(lb))
	}
	if !hasEvent(g.events(), "Warning LoadBalancerNameConflict") {
		t.Errorf("no LoadBalancerNameConflict event")
	}
}

// TestGroup_NameReservedBeforeTheGroupExists (issue 40 §6): a Service outside group pay that
// names its load balancer kubernetes-group-pay before the group has one is refused before any
// request, with a LoadBalancerNameConflict event naming the group; the group then gets its
// load balancer under that name. A Service's own names that only look alike are not refused.
func TestGroup_NameReservedBeforeTheGroupExists(t *testing.T) {
	g := newGroupEnv(t)
	squatter := groupMember("squat", 0, "", []int32{80}, withAnnotation(annotation.LBName, "kubernetes-group-pay"))
	g.add(squatter)
	g.emu.ResetRequests()
	_, err := g.ensure(squatter)
	var reserved *lbservice.ReservedNameError
	if !errors.As(err, &reserved) || reserved.Group != "pay" {
		t.Fatalf("EnsureLoadBalancer(squat) = %v, want a ReservedNameError naming group pay", err)
	}
	if n := total(g.emu.Counts()); n != 0 {
		t.Errorf("the refused Service sent %d requests: %v", n, g.emu.Counts())
	}
	if !hasEventContaining(g.events(), "Warning LoadBalancerNameConflict", "reserved for load balancer group pay") {
		t.Errorf("no LoadBalancerNameConflict event naming group pay")
	}
	member := groupMember("pay", 1, "pay", []int32{443})
	g.add(member)
	g.mustEnsure(member)
	if lb := g.onlyLB(); lb.Name != "kubernetes-group-pay" {
		t.Errorf("group pay's load balancer is %q, want kubernetes-group-pay", lb.Name)
	}
	for _, name := range []string{"kubernetes-group-", "kubernetes-grouppay", "other-group-pay"} {
		if err := lbservice.CheckName(name, clusterName, ""); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", name, err)
		}
	}
}

func TestGroup_NeverAdoptsALoadBalancerOfOneService(t *testing.T) {
	g := newGroupEnv(t)
	single := groupMember("single", 0, "", []int32{80}, withAnnotation(annotation.LBName, "shared"))
	g.add(single)
	g.mustEnsure(single)
	member := groupMember("m", 1, "web", []int32{81}, withAnnotation(annotation.LBName, "shared"))
	g.add(member)
	g.emu.ResetRequests()
	_, err := g.ensure(member)
	var conflict *loadbalancer.NameConflictError
	if !errors.As(err, &conflict) || conflict.OwnerUID != "uid-single" || !strings.Contains(err.Error(), "never adopts") {
		t.Errorf("EnsureLoadBalancer() = %v, want a NameConflictError naming the owner", err)
	}
	if n := g.emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating requests", n)
	}
	if lb := g.onlyLB(); lb.Labels[lbplan.LabelServiceUID] != "uid-single" || len(lb.Services) != 1 {
		t.Errorf("the single Service's load balancer changed: %v %v", lb.Labels, listenPortsOf(lb))
	}
}

func TestGroup_JoinDeletesTheOwnLoadBalancer(t *testing.T) {
	g := newGroupEnv(t)
	a := groupMember("a", 0, "web", []int32{80})
	j := groupMember("j", 1, "", []int32{8080})
	g.add(a, j)
	g.mustEnsure(a)
	g.mustEnsure(j)
	if n := len(g.all()); n != 2 {
		t.Fatalf("%d load balancers before the join, want 2", n)
	}
	j = j.DeepCopy()
	j.Annotations[string(annotation.LBGroup)] = "web"
	g.add(j)
	st := g.mustEnsure(j)
	lb := g.onlyLB()
	if lb.Name != "kubernetes-group-web" || !reflect.DeepEqual(listenPortsOf(lb), []int{80, 8080}) {
		t.Errorf("after the join: %s with %v", lb.Name, listenPortsOf(lb))
	}
	if len(st.Ingress) == 0 || st.Ingress[0].IP != lb.PublicNet.IPv4.IP.String() {
		t.Errorf("status %v, want the group's address", st.Ingress)
	}
}

func TestGroup_InvalidAnnotation(t *testing.T) {
	g := newGroupEnv(t)
	bad := groupMember("bad", 0, "Web!", []int32{80})
	g.add(bad)
	_, err := g.ensure(bad)
	if !annotation.IsUserError(err) || g.emu.MutatingRequests() != 0 {
		t.Errorf("EnsureLoadBalancer() = %v with %d mutating requests, want an annotation error and nothing written", err, g.emu.MutatingRequests())
	}
	if !hasEvent(g.events(), `Warning InvalidAnnotation invalid value for "service.hcloud-policy-ccm.io/load-balancer-group": "Web!"`) {
		t.Errorf("no InvalidAnnotation event")
	}
	if err := g.lbs.EnsureLoadBalancerDeleted(context.Background(), clusterName, bad); err != nil {
		t.Errorf("EnsureLoadBalancerDeleted() = %v: a bad annotation must not keep a Service from going", err)
	}
}

func TestGroup_PreviewShowsTheGroup(t *testing.T) {
	g := newGroupEnv(t)
	a := groupMember("a", 0, "web", []int32{80})
	b := groupMember("b", 1, "web", []int32{81})
	g.add(a, b)
	plan, err := g.lbs.Preview(context.Background(), clusterName, b, g.nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.emu.MutatingRequests() != 0 || plan.Group == nil || len(plan.Group.Members) != 2 || plan.Group.Capacity.Used != 2 {
		t.Errorf("Preview() group %+v, %d mutating requests", plan.Group, g.emu.MutatingRequests())
	}
	if got := plan.Labels(); len(got) == 0 || !strings.HasPrefix(got[0], "create(kubernetes-group-web)") {
		t.Errorf("Preview() = %v, want the group's create", got)
	}
}

// watchedGroupEnv is an env whose Service lister is an informer over a fake clientset, with
// WatchGroups running and its requeues recorded.
type watchedGroupEnv struct {
	*env
	client  *fake.Clientset
	mu      sync.Mutex
	requeue []string
}

func newWatchedGroupEnv(t *testing.T, svcs ...*corev1.Service) *watchedGroupEnv {
	t.Helper()
	objs := make([]runtime.Object, len(svcs))
	for i, s := range svcs {
		objs[i] = s
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	svcInformer := factory.Core().V1().Services()
	w := &watchedGroupEnv{client: client}
	w.env = newEnv(t, withLBOption(func(o *loadbalancer.Options) { o.Services = svcInformer.Lister() }))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	err := w.lbs.WatchGroups(ctx, svcInformer.Informer(), clusterName, func(members []*corev1.Service, reason string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, m := range members {
			w.requeue = append(w.requeue, lbplan.Key(m)+": "+reason)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	// The fake clientset's watch starts after the list the cache synced from, and drops what
	// happens before it: wait until a sentinel Service (no member of any group) created now
	// reaches the lister, so the test's own changes are seen (the test flaked about once in 45
	// runs without it).
	sentinel := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "sentinel", Name: "watch-started"}}
	if _, err := client.CoreV1().Services("sentinel").Create(ctx, sentinel, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the informer's watch", func() bool {
		_, err := svcInformer.Lister().Services("sentinel").Get("watch-started")
		return err == nil
	})
	return w
}

func (w *watchedGroupEnv) update(svc *corev1.Service) {
	w.t.Helper()
	if _, err := w.client.CoreV1().Services(svc.Namespace).Update(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// eventually polls cond for up to 20s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestGroup_LeaveRequeuesTheOthers(t *testing.T) {
	a := groupMember("a", 0, "web", []int32{80})
	b := groupMember("b", 1, "web", []int32{81})
	w := newWatchedGroupEnv(t, a, b)
	w.mustEnsure(a)
	if got := listenPortsOf(w.onlyLB()); !reflect.DeepEqual(got, []int{80, 81}) {
		t.Fatalf("listeners %v", got)
	}
	left := b.DeepCopy()
	delete(left.Annotations, string(annotation.LBGroup))
	w.update(left)
	want := "shop/a: shop/b left load balancer group web"
	eventually(t, "the requeue of shop/a", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return slices.Contains(w.requeue, want)
	})
	// The leaver gets a load balancer of its own; the group's drops its port at a's sync.
	w.mustEnsure(left)
	w.mustEnsure(a)
	lbs, err := w.env.client.LoadBalancer.All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string][]int{}
	for _, lb := range lbs {
		ports[lb.Name] = listenPortsOf(lb)
	}
	if want := map[string][]int{"kubernetes-group-web": {80}, cloudprovider.DefaultLoadBalancerName(left): {81}}; !reflect.DeepEqual(ports, want) {
		t.Errorf("after the leave: %v, want %v", ports, want)
	}
}

// TestGroup_DeleteRequeuesOnlyWhatChanges: a deleted member is looked at once, when it is gone
// (not also when its deletionTimestamp is set), and only the member that claims a port it held
// is requeued; the leader, served and unchanged, is not (issue 33).
func TestGroup_DeleteRequeuesOnlyWhatChanges(t *testing.T) {
	a := groupMember("a", 0, "web", []int32{80})
	b := groupMember("b", 1, "web", []int32{81})
	c := groupMember("c", 2, "web", []int32{82, 81})
	a.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
	c.Status.LoadBalancer.Ingress = a.Status.LoadBalancer.Ingress
	w := newWatchedGroupEnv(t, a, b, c)
	deleting := b.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	w.update(deleting)
	if err := w.client.CoreV1().Services(b.Namespace).Delete(context.Background(), b.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "shop/c: shop/b left load balancer group web"
	eventually(t, "the requeue of shop/c", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return slices.Contains(w.requeue, want)
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if !reflect.DeepEqual(w.requeue, []string{want}) {
		t.Errorf("requeued %q, want only %q", w.requeue, want)
	}
}

func TestGroup_LastMemberLeavesDeletesTheGroupLoadBalancer(t *testing.T) {
	a := groupMember("a", 0, "web", []int32{80})
	w := newWatchedGroupEnv(t, a)
	w.mustEnsure(a)
	left := a.DeepCopy()
	left.Annotations[string(annotation.LBGroup)] = "other"
	w.update(left)
	eventually(t, "the group's load balancer deleted", func() bool {
		lbs, err := w.env.client.LoadBalancer.All(context.Background())
		return err == nil && len(lbs) == 0
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.requeue) != 0 {
		t.Errorf("requeued %v with no member left", w.requeue)
	}
}

// requests sums every request of counts.
func requests(counts map[string]int) int {
	n := 0
	for _, v := range counts {
		n += v
	}
	return n
}

// budgetPhases are the phases budget measures, in order.
var budgetPhases = []string{"create", "resync", "node change", "delete"}

// budget runs the life of n Services with ports ports each (group "": each on its own load
// balancer): every Service ensured in turn, ensured again (a resync), updated with one node
// less (a node change), then deleted one by one; it returns the requests of each phase.
func budget(t *testing.T, group string, n, ports int) map[string]int {
	g := newGroupEnv(t)
	var svcs []*corev1.Service
	for i := range n {
		ps := make([]int32, ports)
		for j := range ports {
			ps[j] = int32(1000 + 10*i + j)
		}
		// lb21 (15 listeners) holds every size measured here, in both set-ups.
		svcs = append(svcs, groupMember(fmt.Sprint("s", i), i, group, ps, withAnnotation(annotation.LBType, "lb21")))
	}
	g.add(svcs...)
	out := map[string]int{}
	phase := func(name string, f func(*corev1.Service) error) {
		g.emu.ResetRequests()
		for _, s := range svcs {
			if err := f(s); err != nil {
				t.Fatalf("%s of %s: %v", name, s.Name, err)
			}
		}
		out[name] = requests(g.emu.Counts())
	}
	ensure := func(s *corev1.Service) error { _, err := g.ensure(s); return err }
	phase("create", ensure)
	phase("resync", ensure)
	phase("node change", func(s *corev1.Service) error {
		return g.lbs.UpdateLoadBalancer(context.Background(), clusterName, s, g.nodes[:1])
	})
	phase("delete", g.remove)
	if lbs := g.all(); len(lbs) != 0 {
		t.Fatalf("%d load balancers left", len(lbs))
	}
	return out
}

// TestGroup_RequestBudget: over its life (create, resync, node change, delete) a group of n
// Services costs no more requests than n separate Services for the same listeners, and no
// more in each phase but delete: removing a member's k listeners is k delete_service actions
// where a Service of its own is one delete (docs/performance.md has the figures).
func TestGroup_RequestBudget(t *testing.T) {
	for _, ports := range []int{1, 2} {
		t.Run(fmt.Sprint(ports, " ports each"), func(t *testing.T) {
			group, separate := budget(t, "web", 3, ports), budget(t, "", 3, ports)
			var gt, st int
			for _, p := range budgetPhases {
				gt, st = gt+group[p], st+separate[p]
				t.Logf("3 Services, %d ports each, %s: group %d requests, separate %d", ports, p, group[p], separate[p])
				if p != "delete" && group[p] > separate[p] {
					t.Errorf("%s: the group costs %d requests, separate Services %d", p, group[p], separate[p])
				}
			}
			t.Logf("3 Services, %d ports each, whole life: group %d requests, separate %d", ports, gt, st)
			if gt > st {
				t.Errorf("over the whole life the group costs %d requests, separate Services %d", gt, st)
			}
		})
	}
}

func TestGroup_PreviewDelete(t *testing.T) {
	g := newGroupEnv(t)
	a := groupMember("a", 0, "web", []int32{80})
	b := groupMember("b", 1, "web", []int32{81, 80})
	g.add(a, b)
	g.mustEnsure(a)
	g.emu.ResetRequests()
	plan, err := g.lbs.PreviewDelete(context.Background(), clusterName, b)
	if err != nil || !reflect.DeepEqual(plan.Labels(), []string{"delete_service(81)"}) || plan.Group == nil || len(plan.Group.Members) != 1 {
		t.Errorf("PreviewDelete(b) = %v %+v, %v; want port 81 removed (80 is a's) and a left", plan.Labels(), plan.Group, err)
	}
	if err := g.idx.Delete(b); err != nil {
		t.Fatal(err)
	}
	plan, err = g.lbs.PreviewDelete(context.Background(), clusterName, a)
	if err != nil || !reflect.DeepEqual(plan.Labels(), []string{"delete(kubernetes-group-web)"}) || plan.Group == nil || len(plan.Group.Members) != 0 {
		t.Errorf("PreviewDelete(last) = %v %+v, %v; want the delete", plan.Labels(), plan.Group, err)
	}
	if n := g.emu.MutatingRequests(); n != 0 {
		t.Errorf("PreviewDelete made %d mutating requests", n)
	}
}

func TestGroup_AdvisoryWarnings(t *testing.T) {
	g := newGroupEnv(t, withLBOption(func(o *loadbalancer.Options) { o.Config.Type = "" }))
	leader := groupMember("a", 0, "web", []int32{80})
	udp := groupMember("b", 1, "web", []int32{81})
	udp.Spec.Ports = append(udp.Spec.Ports, corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053})
	g.add(leader, udp)
	g.mustEnsure(udp)
	ev := g.events()
	if !hasEvent(ev, "Warning UnsupportedProtocolConfigured port 53 uses protocol UDP") || hasEvent(ev, "Warning LoadBalancerTypeUnconfigured") {
		t.Errorf("member's events %v, want its UDP port reported and no type warning (the leader's)", ev)
	}
	g.mustEnsure(leader)
	if ev := g.events(); !hasEvent(ev, "Warning LoadBalancerTypeUnconfigured") {
		t.Errorf("leader's events %v, want LoadBalancerTypeUnconfigured", ev)
	}
}

// TestGroup_ConcurrentMembersCreateOneLoadBalancer: members synced at the same time (the
// service controller's --concurrent-service-syncs) create one load balancer: the group's
// reconciles are serialised.
func TestGroup_ConcurrentMembersCreateOneLoadBalancer(t *testing.T) {
	g := newGroupEnv(t)
	var svcs []*corev1.Service
	for i := range 4 {
		svcs = append(svcs, groupMember(fmt.Sprint("m", i), i, "web", []int32{int32(80 + i)}))
	}
	g.add(svcs...)
	var wg sync.WaitGroup
	errs := make([]error, len(svcs))
	for i, s := range svcs {
		wg.Go(func() { _, errs[i] = g.lbs.EnsureLoadBalancer(context.Background(), clusterName, s, g.nodes) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := g.emu.Counts()["POST /v1/load_balancers"]; n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
	if got := listenPortsOf(g.onlyLB()); !reflect.DeepEqual(got, []int{80, 81, 82, 83}) {
		t.Errorf("listeners %v", got)
	}
}

// TestGroup_RestartFindsTheGroupLoadBalancer: a new CCM process (another LoadBalancers, empty
// caches: a restart or a leader change) finds the group's load balancer by its labels and adds
// a member's ports to it: no duplicate, nothing lost.
func TestGroup_RestartFindsTheGroupLoadBalancer(t *testing.T) {
	g := newGroupEnv(t)
	a := groupMember("a", 0, "web", []int32{80})
	g.add(a)
	g.mustEnsure(a)
	b := groupMember("b", 1, "web", []int32{81})
	g.add(b)
	restarted := newLoadBalancers(t, loadbalancer.Options{Readers: g.readers(), Executor: g.exec, Config: config.LoadBalancer{Location: "fsn1", Type: "lb11"},
		Recorder: g.recorder, Services: corelisters.NewServiceLister(g.idx)})
	g.emu.ResetRequests()
	if _, err := restarted.EnsureLoadBalancer(context.Background(), clusterName, b, g.nodes); err != nil {
		t.Fatal(err)
	}
	if n := g.emu.Counts()["POST /v1/load_balancers"]; n != 0 {
		t.Errorf("%d creates after the restart, want 0", n)
	}
	if got := listenPortsOf(g.onlyLB()); !reflect.DeepEqual(got, []int{80, 81}) {
		t.Errorf("listeners %v, want a's and b's", got)
	}
}

// TestGroup_OtherMembersErrorsStayTheirs: a member with an invalid annotation is left out of
// another member's plan, and its InvalidAnnotation event comes from its own sync only.
func TestGroup_OtherMembersErrorsStayTheirs(t *testing.T) {
	g := newGroupEnv(t)
	a := groupMember("a", 0, "web", []int32{80})
	bad := groupMember("bad", 1, "web", []int32{81}, withAnnotation(annotation.LBSvcHTTPCertificates, "missing-cert"))
	g.add(a, bad)
	g.mustEnsure(a)
	if ev := g.events(); hasEvent(ev, "Warning InvalidAnnotation") {
		t.Errorf("a's sync raised %v", ev)
	}
	if got := listenPortsOf(g.onlyLB()); !reflect.DeepEqual(got, []int{80}) {
		t.Errorf("listeners %v, want a's only", got)
	}
	if _, err := g.ensure(bad); !annotation.IsUserError(err) {
		t.Errorf("bad's sync: %v, want its annotation error", err)
	}
	if ev := g.events(); !hasEvent(ev, "Warning InvalidAnnotation") {
		t.Errorf("bad's sync raised %v, want InvalidAnnotation", ev)
	}
}

// TestGroup_SweepDeletesGroupsWithoutMembers: the sweep at start and at every resync
// (SweepOrphanGroups) deletes the load balancer of every group of the cluster that has no
// member left in the lister, as the last member's leave would have: gate first (input.service
// null, input.group with no member), delete protection honoured, a denial kept. A group with
// a member, a group of another cluster and a load balancer of one Service are left alone
// (issue 34: members that left while the CCM was down orphaned their groups).
func TestGroup_SweepDeletesGroupsWithoutMembers(t *testing.T) {
	tests := []struct {
		name        string
		protect     bool
		deny        bool
		wantDeleted int
		wantErr     string
		wantLeft    []string // names of the load balancers left, sorted
	}{
		{name: "the groups without members are deleted", wantDeleted: 2,
			wantLeft: []string{"kubernetes-group-kept", "other-group-solo", "own"}},
		{name: "a delete-protected one is kept", protect: true, wantDeleted: 1,
			wantLeft: []string{"kubernetes-group-kept", "kubernetes-group-solo", "other-group-solo", "own"}},
		{name: "a denied delete is kept and reported", deny: true, wantErr: "sweep load balancer group solo: 1 of 1 changes denied",
			wantLeft: []string{"kubernetes-group-kept", "kubernetes-group-solo", "kubernetes-group-xg", "other-group-solo", "own"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newGroupEnv(t)
			solo := groupMember("solo", 0, "solo", []int32{80})
			xg := groupMember("xg", 1, "xg", []int32{81})
			kept := groupMember("kept", 2, "kept", []int32{82})
			g.add(solo, xg, kept)
			for _, m := range []*corev1.Service{solo, xg, kept} {
				g.mustEnsure(m)
			}
			for _, spec := range []hcloudemu.LoadBalancerSpec{
				{Name: "other-group-solo", Labels: lbgroup.GroupLabels("solo", "other")},
				{Name: "own", Labels: map[string]string{lbplan.LabelServiceUID: "uid-own"}},
			} {
				if _, err := g.emu.AddLoadBalancer(spec); err != nil {
					t.Fatal(err)
				}
			}
			if tc.protect {
				lb, _, err := g.client.LoadBalancer.GetByName(context.Background(), "kubernetes-group-solo")
				if err != nil || lb == nil {
					t.Fatalf("get kubernetes-group-solo: %v", err)
				}
				if _, _, err := g.client.LoadBalancer.ChangeProtection(context.Background(), lb, hcloud.LoadBalancerChangeProtectionOpts{Delete: hcloud.Ptr(true)}); err != nil {
					t.Fatal(err)
				}
			}
			// While no CCM ran: solo's annotation was removed, xg moved to another group.
			left := solo.DeepCopy()
			delete(left.Annotations, string(annotation.LBGroup))
			moved := xg.DeepCopy()
			moved.Annotations[string(annotation.LBGroup)] = "xg2"
			g.add(left, moved)
			g.decider.mu.Lock()
			g.decider.inputs = nil
			g.decider.mu.Unlock()
			if tc.deny {
				g.decider.set(false, "delete")
			}

			n, err := g.lbs.SweepOrphanGroups(context.Background(), clusterName)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("SweepOrphanGroups: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "sweep load balancer group xg: ")):
				t.Fatalf("SweepOrphanGroups error %v, want %q", err, tc.wantErr)
			}
			if n != tc.wantDeleted {
				t.Errorf("deleted %d, want %d", n, tc.wantDeleted)
			}
			var names []string
			for _, lb := range g.all() {
				names = append(names, lb.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, tc.wantLeft) {
				t.Errorf("load balancers left %v, want %v", names, tc.wantLeft)
			}
			g.decider.mu.Lock()
			defer g.decider.mu.Unlock()
			for _, in := range g.decider.inputs {
				if in.Action != input.ActionLoadBalancerDelete || in.Service != nil || in.Group == nil || len(in.Group.Members) != 0 || in.Current == nil {
					t.Errorf("decision %s %s: service %v, group %+v, current %v; want a delete with no service, the group without members and the load balancer", in.Action, in.Operation, in.Service, in.Group, in.Current)
				}
			}
			if want := 2 - btoi(tc.protect); len(g.decider.inputs) != want {
				t.Errorf("%d decisions, want %d (one per delete sent to the gate)", len(g.decider.inputs), want)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// inNamespace moves a test Service to namespace ns.
func inNamespace(ns string) serviceTweak {
	return func(s *corev1.Service) { s.Namespace = ns }
}

// withAddress gives a test Service the address its load balancer put in its status.
func withAddress(ip string) serviceTweak {
	return func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
	}
}

// TestGroup_HomeNeverMovesToAnotherNamespace (issue 40 §3): group shop's load balancer is
// created by home/h, so its home is namespace home. evil/e, older than h, joins later. Its load
// balancer is deleted by hand: e's sync creates nothing (Warning LoadBalancerGroupHome, no
// mutating request), h's sync creates it again with home home; after a restart without the
// load balancer, h's address stands for the home.
func TestGroup_HomeNeverMovesToAnotherNamespace(t *testing.T) {
	g := newGroupEnv(t)
	h := groupMember("h", 1, "shop", []int32{80}, inNamespace("home"))
	g.add(h)
	g.mustEnsure(h)
	e := groupMember("e", 0, "shop", []int32{81}, inNamespace("evil"))
	g.add(e)
	g.mustEnsure(e)
	if home := g.onlyLB().Labels[lbplan.LabelGroupNamespace]; home != "home" {
		t.Fatalf("home %q, want home", home)
	}
	for _, lbs := range [][]*loadbalancer.LoadBalancers{{g.lbs}, {newLoadBalancers(t, loadbalancer.Options{Readers: g.readers(), Executor: g.exec,
		Config: config.LoadBalancer{Location: "fsn1", Type: "lb11"}, Recorder: g.recorder, Services: corelisters.NewServiceLister(g.idx)})}} {
		l := lbs[0]
		if _, _, err := g.client.LoadBalancer.DeleteWithResult(context.Background(), g.onlyLB()); err != nil {
			t.Fatal(err)
		}
		withAddress("192.0.2.10")(h) // what its first sync set; evil/e has none
		g.add(h)
		g.emu.ResetRequests()
		_, err := l.EnsureLoadBalancer(context.Background(), clusterName, e, g.nodes)
		var homeErr *lbgroup.GroupHomeError
		if !errors.As(err, &homeErr) || homeErr.Home != "home" {
			t.Fatalf("EnsureLoadBalancer(evil/e) without the load balancer = %v, want a GroupHomeError naming home", err)
		}
		if n := g.emu.MutatingRequests(); n != 0 {
			t.Errorf("evil/e's sync sent %d mutating requests: %v", n, g.emu.Counts())
		}
		if !hasEvent(g.events(), "Warning LoadBalancerGroupHome") {
			t.Errorf("no LoadBalancerGroupHome event on evil/e")
		}
		if _, err := l.EnsureLoadBalancer(context.Background(), clusterName, h, g.nodes); err != nil {
			t.Fatal(err)
		}
		if home := g.onlyLB().Labels[lbplan.LabelGroupNamespace]; home != "home" {
			t.Errorf("re-created with home %q, want home", home)
		}
	}
}

// TestGroup_SweptWhenTheHomeHasNoMember (issue 40 §4): when the last member of the home
// namespace leaves, the group's load balancer is deleted although a member of another
// namespace remains; that member's sync then creates nothing and is told why.
func TestGroup_SweptWhenTheHomeHasNoMember(t *testing.T) {
	g := newGroupEnv(t)
	h := groupMember("h", 1, "shop", []int32{80}, inNamespace("home"))
	g.add(h)
	g.mustEnsure(h)
	e := groupMember("e", 0, "shop", []int32{81}, inNamespace("evil"))
	g.add(e)
	g.mustEnsure(e)
	if err := g.remove(h); err != nil {
		t.Fatal(err)
	}
	if lbs := g.all(); len(lbs) != 0 {
		t.Fatalf("%d load balancers after the home's last member left, want 0", len(lbs))
	}
	g.emu.ResetRequests()
	_, err := g.ensure(e)
	var homeErr *lbgroup.GroupHomeError
	if !errors.As(err, &homeErr) || !homeErr.Empty {
		t.Fatalf("EnsureLoadBalancer(evil/e) = %v, want a GroupHomeError for an empty home", err)
	}
	if n := g.emu.MutatingRequests(); n != 0 || len(g.all()) != 0 {
		t.Errorf("evil/e's sync sent %d mutating requests and left %d load balancers", n, len(g.all()))
	}
	if !hasEventContaining(g.events(), "Warning LoadBalancerGroupHome", "no member left") {
		t.Errorf("no LoadBalancerGroupHome event saying the home has no member left")
	}
}

// TestGroup_RecreateSyncsTheOtherMembers: when a member's sync creates the group's load
// balancer again (deleted by hand), the other members that show an address (the old load
// balancer's) are synced now, so that their status gets the new one (found by the fault soak,
// issue 45); the group's first create syncs nobody.
func TestGroup_RecreateSyncsTheOtherMembers(t *testing.T) {
	tracker := &driftTracker{}
	g := newGroupEnv(t, withLBOption(func(o *loadbalancer.Options) { o.DenialTracker = tracker }))
	a := groupMember("a", 0, "web", []int32{80})
	b := groupMember("b", 1, "web", []int32{81})
	g.add(a, b)
	g.mustEnsure(a)
	g.mustEnsure(b)
	if got := tracker.got(); len(got) != 0 {
		t.Fatalf("the first create synced %v, want nobody", got)
	}
	withAddress("192.0.2.10")(a)
	withAddress("192.0.2.10")(b)
	g.add(a, b)
	if _, _, err := g.client.LoadBalancer.DeleteWithResult(context.Background(), g.onlyLB()); err != nil {
		t.Fatal(err)
	}
	g.mustEnsure(a)
	if got := tracker.got(); !slices.Equal(got, []string{"shop/b"}) {
		t.Errorf("after the re-create, synced %v, want [shop/b]", got)
	}
}

// TestGroup_MembersAreTheServicesServed: a Service of our class (--load-balancer-class) with a
// group annotation shares the group's load balancer with class-less members; a Service of
// another class with the same annotation is no member (its ports stay off), and in class-only
// mode a class-less Service is none either (issue 43).
func TestGroup_MembersAreTheServicesServed(t *testing.T) {
	ours, cilium := "example.com/hetzner", "io.cilium/l2-announcer"
	withClass := func(class string) serviceTweak {
		return func(s *corev1.Service) { s.Spec.LoadBalancerClass = &class }
	}
	tests := []struct {
		name      string
		classOnly bool
		want      []int
	}{
		{name: "beside the class-less", want: []int{80, 81}},
		{name: "class-only", classOnly: true, want: []int{81}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newGroupEnv(t, withLBOption(func(o *loadbalancer.Options) { o.Config.Class, o.ClassOnly = ours, tc.classOnly }))
			plain := groupMember("plain", 0, "web", []int32{80})
			mine := groupMember("mine", 1, "web", []int32{81}, withClass(ours))
			other := groupMember("other", 2, "web", []int32{82}, withClass(cilium))
			g.add(plain, mine, other)
			g.mustEnsure(mine)
			if got := listenPortsOf(g.onlyLB()); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("listeners %v, want %v (never the other class's 82)", got, tc.want)
			}
		})
	}
}

// TestSweep_RepairsGroupDrift: the group sweep's list shows a group's load balancer whose
// listener was deleted by hand since the last successful plan: the members with an address are
// synced, with no request beyond the list; an unchanged group syncs nobody (found by the fault
// soak: a group listener deleted by hand stayed gone).
func TestSweep_RepairsGroupDrift(t *testing.T) {
	tracker := &driftTracker{}
	g := newGroupEnv(t, withLBOption(func(o *loadbalancer.Options) { o.DenialTracker = tracker }))
	a := groupMember("a", 0, "web", []int32{80}, withAddress("192.0.2.10"))
	g.add(a)
	g.mustEnsure(a)
	time.Sleep(time.Millisecond) // the list starts after the record
	if _, err := g.lbs.SweepOrphanGroups(context.Background(), clusterName); err != nil {
		t.Fatal(err)
	}
	if got := tracker.got(); len(got) != 0 {
		t.Fatalf("an unchanged group synced %v", got)
	}
	if _, _, err := g.client.LoadBalancer.DeleteService(context.Background(), g.onlyLB(), 80); err != nil {
		t.Fatal(err)
	}
	g.emu.ResetRequests()
	if _, err := g.lbs.SweepOrphanGroups(context.Background(), clusterName); err != nil {
		t.Fatal(err)
	}
	if got := tracker.got(); !slices.Equal(got, []string{"shop/a"}) {
		t.Errorf("after a hand edit of the group's load balancer, synced %v, want [shop/a]", got)
	}
	if n := total(g.emu.Counts()); n != 1 {
		t.Errorf("the sweep sent %d requests, want its one list (%v)", n, g.emu.Counts())
	}
}
