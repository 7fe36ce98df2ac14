package lbplan_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

// member is a Service of type LoadBalancer created age minutes after t0, with annotations kv
// (name, value pairs).
func member(ns, name string, age int, kv ...string) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{},
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}
	for i := 0; i+1 < len(kv); i += 2 {
		s.Annotations[kv[i]] = kv[i+1]
	}
	return s
}

const grp = string(annotation.LBGroup)

func keys(svcs []*corev1.Service) []string {
	out := []string{}
	for _, s := range svcs {
		out = append(out, lbplan.Key(s))
	}
	return out
}

func TestGroupMembers(t *testing.T) {
	deleting := member("shop", "gone", 0, grp, "web")
	now := metav1.NewTime(t0)
	deleting.DeletionTimestamp = &now
	clusterIP := member("shop", "internal", 0, grp, "web")
	clusterIP.Spec.Type = corev1.ServiceTypeClusterIP
	tests := []struct {
		name string
		in   []*corev1.Service
		want []string
	}{
		{"none", nil, []string{}},
		{"oldest first", []*corev1.Service{member("shop", "b", 2, grp, "web"), member("shop", "a", 1, grp, "web")}, []string{"shop/a", "shop/b"}},
		{"same age by namespace/name", []*corev1.Service{member("z", "a", 1, grp, "web"), member("a", "z", 1, grp, "web"), nil}, []string{"a/z", "z/a"}},
		{"other group, no annotation, invalid value", []*corev1.Service{
			member("shop", "a", 1, grp, "api"), member("shop", "b", 1), member("shop", "c", 1, grp, "Web"), member("shop", "d", 3, grp, "web"),
		}, []string{"shop/d"}},
		{"deleting and not a load balancer", []*corev1.Service{deleting, clusterIP, member("other", "x", 5, grp, "web")}, []string{"other/x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := keys(lbgroup.GroupMembers(tc.in, "web")); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("GroupMembers() = %v, want %v", got, tc.want)
			}
		})
	}
}

func listeners(ports ...int) []lbplan.Listener {
	out := make([]lbplan.Listener, len(ports))
	for i, p := range ports {
		out[i] = lbplan.Listener{Protocol: "tcp", ListenPort: p, DestinationPort: 30000 + p}
	}
	return out
}

func listenPorts(ls []lbplan.Listener) []int {
	out := []int{}
	for _, l := range ls {
		out = append(out, l.ListenPort)
	}
	return out
}

func TestAdmitGroup(t *testing.T) {
	tests := []struct {
		name      string
		members   []lbgroup.MemberListeners
		max       int
		wantPorts []int
		wantOwned map[string][]int
		conflicts []lbgroup.PortConflict
		refused   []lbgroup.CapacityRefusal
	}{
		{"union", []lbgroup.MemberListeners{{Member: "ns/a", Listeners: listeners(80, 443)}, {Member: "ns/b", Listeners: listeners(8080)}, {Member: "ns/c", Listeners: listeners(22)}}, 5,
			[]int{22, 80, 443, 8080}, map[string][]int{"ns/a": {80, 443}, "ns/b": {8080}, "ns/c": {22}}, nil, nil},
		{"older keeps a port, other ports served", []lbgroup.MemberListeners{{Member: "ns/a", Listeners: listeners(443)}, {Member: "ns/b", Listeners: listeners(443, 8443)}}, 5,
			[]int{443, 8443}, map[string][]int{"ns/a": {443}, "ns/b": {8443}}, []lbgroup.PortConflict{{Port: 443, Owner: "ns/a", Member: "ns/b"}}, nil},
		{"all ports taken", []lbgroup.MemberListeners{{Member: "ns/a", Listeners: listeners(80)}, {Member: "ns/b", Listeners: listeners(80)}}, 5,
			[]int{80}, map[string][]int{"ns/a": {80}, "ns/b": {}}, []lbgroup.PortConflict{{Port: 80, Owner: "ns/a", Member: "ns/b"}}, nil},
		{"capacity refuses the whole member, a later one that fits is admitted", []lbgroup.MemberListeners{
			{Member: "ns/a", Listeners: listeners(1, 2, 3, 4)}, {Member: "ns/b", Listeners: listeners(5, 6)}, {Member: "ns/c", Listeners: listeners(7)}}, 5,
			[]int{1, 2, 3, 4, 7}, map[string][]int{"ns/a": {1, 2, 3, 4}, "ns/b": {}, "ns/c": {7}}, nil,
			[]lbgroup.CapacityRefusal{{Member: "ns/b", Need: 2, Total: 6}}},
		{"exactly full", []lbgroup.MemberListeners{{Member: "ns/a", Listeners: listeners(1, 2)}, {Member: "ns/b", Listeners: listeners(3)}}, 3,
			[]int{1, 2, 3}, map[string][]int{"ns/a": {1, 2}, "ns/b": {3}}, nil, nil},
		{"a conflicting port does not count", []lbgroup.MemberListeners{{Member: "ns/a", Listeners: listeners(1, 2)}, {Member: "ns/b", Listeners: listeners(2, 3)}}, 3,
			[]int{1, 2, 3}, map[string][]int{"ns/a": {1, 2}, "ns/b": {3}}, []lbgroup.PortConflict{{Port: 2, Owner: "ns/a", Member: "ns/b"}}, nil},
		{"a refused member's ports are free for later ones", []lbgroup.MemberListeners{{Member: "ns/a", Listeners: listeners(1)}, {Member: "ns/b", Listeners: listeners(2, 3)}, {Member: "ns/c", Listeners: listeners(2)}}, 2,
			[]int{1, 2}, map[string][]int{"ns/a": {1}, "ns/b": {}, "ns/c": {2}}, nil, []lbgroup.CapacityRefusal{{Member: "ns/b", Need: 2, Total: 3}}},
		{"no limit", []lbgroup.MemberListeners{{Member: "ns/a", Listeners: listeners(1, 2, 3)}}, 0, []int{1, 2, 3}, map[string][]int{"ns/a": {1, 2, 3}}, nil, nil},
		{"no ports", []lbgroup.MemberListeners{{Member: "ns/a"}}, 1, []int{}, map[string][]int{"ns/a": {}}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			adm := lbgroup.AdmitGroup(tc.members, tc.max)
			if got := listenPorts(adm.Listeners); !reflect.DeepEqual(got, tc.wantPorts) {
				t.Errorf("listeners = %v, want %v", got, tc.wantPorts)
			}
			if !reflect.DeepEqual(adm.Ports, tc.wantOwned) {
				t.Errorf("ports = %v, want %v", adm.Ports, tc.wantOwned)
			}
			if !reflect.DeepEqual(adm.Conflicts, tc.conflicts) {
				t.Errorf("conflicts = %+v, want %+v", adm.Conflicts, tc.conflicts)
			}
			if !reflect.DeepEqual(adm.Refused, tc.refused) {
				t.Errorf("refused = %+v, want %+v", adm.Refused, tc.refused)
			}
		})
	}
}

func TestGroupMessages(t *testing.T) {
	c := lbgroup.PortConflict{Port: 443, Owner: "ns/older", Member: "ns/newer"}
	if got, want := c.Message("G"), "port 443 is already served by ns/older in load balancer group G; ns/newer's other ports are served"; got != want {
		t.Errorf("PortConflict.Message() = %q, want %q", got, want)
	}
	types := []lbgroup.TypeLimit{{Name: "lb31", MaxServices: 30}, {Name: "lb11", MaxServices: 5}, {Name: "lb21", MaxServices: 15}}
	r := lbgroup.CapacityRefusal{Member: "ns/svc", Need: 2, Total: 6}
	s, ok := lbgroup.SuggestType(types, r.Total)
	got := lbgroup.CapacityMessage(r, "G", lbgroup.TypeLimit{Name: "lb11", MaxServices: 5}, s, ok, "ns/oldest")
	want := "load balancer group G (type lb11) serves at most 5 listeners; ns/svc needs 2 more (6 in all). Type lb21 (15) would fit: set load-balancer.hetzner.cloud/type on the leader ns/oldest."
	if got != want {
		t.Errorf("CapacityMessage() =\n%s\nwant\n%s", got, want)
	}
	s, ok = lbgroup.SuggestType(types, 31)
	if got := lbgroup.CapacityMessage(lbgroup.CapacityRefusal{Member: "ns/svc", Need: 1, Total: 31}, "G", lbgroup.TypeLimit{Name: "lb31", MaxServices: 30}, s, ok, "ns/a"); ok ||
		got != "load balancer group G (type lb31) serves at most 30 listeners; ns/svc needs 1 more (31 in all). No load balancer type holds that many: split the group." {
		t.Errorf("CapacityMessage() without a fitting type = %q (suggested %v)", got, ok)
	}
}

func TestSuggestType(t *testing.T) {
	types := []lbgroup.TypeLimit{{Name: "lb31", MaxServices: 30}, {Name: "lb11", MaxServices: 5}, {Name: "lb21", MaxServices: 15}, {Name: "lb21b", MaxServices: 15}}
	tests := []struct {
		need   int
		want   string
		wantOK bool
	}{{1, "lb11", true}, {5, "lb11", true}, {6, "lb21", true}, {16, "lb31", true}, {31, "", false}}
	for _, tc := range tests {
		got, ok := lbgroup.SuggestType(types, tc.need)
		if got.Name != tc.want || ok != tc.wantOK {
			t.Errorf("SuggestType(%d) = %v, %v; want %s, %v", tc.need, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestSettingConflicts(t *testing.T) {
	typ, loc, name := string(annotation.LBType), string(annotation.LBLocation), string(annotation.LBName)
	tests := []struct {
		name    string
		leader  *corev1.Service
		member  *corev1.Service
		want    []lbgroup.SettingConflict
		message string
	}{
		{"agree", member("ns", "a", 0, typ, "lb11"), member("ns", "b", 1, typ, "lb11"), nil, ""},
		{"member unset", member("ns", "a", 0, typ, "lb11"), member("ns", "b", 1), nil, ""},
		{"leader itself", member("ns", "a", 0, typ, "lb11"), member("ns", "a", 0, typ, "lb21"), nil, ""},
		{"per-port settings are no conflict", member("ns", "a", 0), member("ns", "b", 1, string(annotation.LBSvcProtocol), "http"), nil, ""},
		{"differs", member("ns", "a", 0, typ, "lb11"), member("ns", "b", 1, typ, "lb21"),
			[]lbgroup.SettingConflict{{Annotation: annotation.LBType, Value: "lb21", LeaderValue: "lb11", LeaderSet: true}},
			`load-balancer.hetzner.cloud/type: "lb21" here, "lb11" on the leader ns/a (in force)`},
		{"two, leader unset", member("ns", "a", 0, typ, "lb11"), member("ns", "b", 1, typ, "lb21", loc, "hel1", name, "x"),
			[]lbgroup.SettingConflict{
				{Annotation: annotation.LBType, Value: "lb21", LeaderValue: "lb11", LeaderSet: true},
				{Annotation: annotation.LBLocation, Value: "hel1"},
				{Annotation: annotation.LBName, Value: "x"},
			},
			`load-balancer.hetzner.cloud/type: "lb21" here, "lb11" on the leader ns/a (in force); load-balancer.hetzner.cloud/location: "hel1" here, not set on the leader ns/a (in force); load-balancer.hetzner.cloud/name: "x" here, not set on the leader ns/a (in force)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := lbgroup.SettingConflicts(tc.leader, tc.member)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("SettingConflicts() = %+v, want %+v", got, tc.want)
			}
			if msg := lbgroup.SettingConflictMessage(got, lbplan.Key(tc.leader)); msg != tc.message {
				t.Errorf("SettingConflictMessage() =\n%s\nwant\n%s", msg, tc.message)
			}
		})
	}
}

func TestGroupDesiredAndView(t *testing.T) {
	leader := lbplan.Desired{Name: "a123", Type: "lb11", Labels: map[string]string{lbplan.LabelServiceUID: "uid-a"}, Services: listeners(80)}
	a, b := member("shop", "a", 0, grp, "web"), member("shop", "b", 1, grp, "web")
	adm := lbgroup.AdmitGroup([]lbgroup.MemberListeners{{Member: "shop/a", Listeners: listeners(80)}, {Member: "shop/b", Listeners: listeners(80, 8080)}}, 5)
	d := lbgroup.GroupDesired(leader, adm, lbplan.GroupLoadBalancerName("kubernetes", "web"), lbgroup.GroupLabels("web", "kubernetes"))
	if d.Name != "kubernetes-group-web" || !d.Rename || d.Type != "lb11" {
		t.Errorf("name %q rename %v type %q", d.Name, d.Rename, d.Type)
	}
	if want := map[string]string{lbplan.LabelGroup: "web", lbplan.LabelCluster: "kubernetes"}; !reflect.DeepEqual(d.Labels, want) {
		t.Errorf("labels = %v, want %v (never the service-uid label)", d.Labels, want)
	}
	if got := listenPorts(d.Services); !reflect.DeepEqual(got, []int{80, 8080}) {
		t.Errorf("services = %v", got)
	}
	if leader.Labels[lbplan.LabelServiceUID] != "uid-a" || len(leader.Services) != 1 {
		t.Errorf("GroupDesired changed the leader's desired state: %+v", leader)
	}
	g := lbgroup.GroupView("web", "shop", []*corev1.Service{a, b}, adm, lbgroup.TypeLimit{Name: "lb11", MaxServices: 5})
	want := &input.Group{Name: "web", Namespace: "shop", Leader: input.ServiceRef{Namespace: "shop", Name: "a"},
		Members:  []input.GroupMember{{Namespace: "shop", Name: "a", Ports: []int{80}}, {Namespace: "shop", Name: "b", Ports: []int{8080}}},
		Capacity: input.GroupCapacity{Type: "lb11", MaxServices: 5, Used: 2}}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("GroupView() = %+v, want %+v", g, want)
	}
}

func TestGroupLoadBalancerName(t *testing.T) {
	long := strings.Repeat("c", 130)
	tests := []struct{ cluster, group, want string }{
		{"kubernetes", "web", "kubernetes-group-web"},
		{long, "web", long[:128]},
		{long[:121], "web", long[:121] + "-group"}, // the cut ends on the dash after "group": trimmed
	}
	for _, tc := range tests {
		got := lbplan.GroupLoadBalancerName(tc.cluster, tc.group)
		if len(got) > 128 {
			t.Errorf("GroupLoadBalancerName(%q) has %d characters", tc.cluster, len(got))
		}
		if got != tc.want {
			t.Errorf("GroupLoadBalancerName(%q, %q) = %q, want %q", tc.cluster, tc.group, got, tc.want)
		}
	}
	if got := lbgroup.GroupSelector("web", "kubernetes"); got != "hcloud-policy-ccm.io/load-balancer-group=web,hcloud-policy-ccm.io/cluster=kubernetes" {
		t.Errorf("GroupSelector() = %q", got)
	}
}

func TestComputeRemoveListeners(t *testing.T) {
	a := &lbplan.Actual{ID: 1, Name: "lb", Services: listeners(80, 443, 8080)}
	tests := []struct {
		name  string
		a     *lbplan.Actual
		ports []int
		want  []string
	}{
		{"some", a, []int{443, 8080, 9000}, []string{"delete_service(443)", "delete_service(8080)"}},
		{"none served", a, []int{22}, []string{}},
		{"no load balancer", nil, []int{80}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := lbgroup.ComputeRemoveListeners(tc.a, tc.ports).Labels()
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ComputeRemoveListeners() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCompute_GroupIdentity(t *testing.T) {
	base := lbplan.Desired{Name: "lb", Type: "lb11", Location: "fsn1", Services: listeners(80)}
	tests := []struct {
		name    string
		labels  map[string]string
		wantErr string
	}{
		{"uid", map[string]string{lbplan.LabelServiceUID: "u"}, ""},
		{"group", lbgroup.GroupLabels("web", "k"), ""},
		{"group without cluster", map[string]string{lbplan.LabelGroup: "web"}, "has no hcloud-ccm/service-uid label"},
		{"none", nil, "has no hcloud-ccm/service-uid label"},
		{"both", map[string]string{lbplan.LabelServiceUID: "u", lbplan.LabelGroup: "web", lbplan.LabelCluster: "k"}, "has both"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := base
			d.Labels = tc.labels
			_, err := lbplan.Compute(d, nil)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Compute() error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestGroupHomeAndLeader: the home is the load balancer's label, else the oldest member's
// namespace; the leader is the oldest member in the home, else the oldest member (issue 34 §2).
func TestGroupHomeAndLeader(t *testing.T) {
	at := func(ns, name string, sec int64) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.Unix(sec, 0)}}
	}
	labelled := func(home string) *lbplan.Actual {
		return &lbplan.Actual{Labels: lbgroup.GroupDesiredLabels("shop", "k8s", home)}
	}
	a1, v2, w3 := at("evil", "a1", 1), at("grp", "v2", 2), at("grp", "w3", 3)
	tests := []struct {
		name       string
		lb         *lbplan.Actual
		members    []*corev1.Service
		wantHome   string
		wantLeader *corev1.Service
	}{
		{"new group: the oldest member's namespace", nil, []*corev1.Service{v2, w3}, "grp", v2},
		{"succession: the label keeps the home, the home's oldest leads", labelled("grp"), []*corev1.Service{a1, v2, w3}, "grp", v2},
		{"no member left in the home: the oldest leads, the home stays", labelled("grp"), []*corev1.Service{a1}, "grp", a1},
		{"load balancer made before the label: the oldest member's namespace", &lbplan.Actual{Labels: lbgroup.GroupLabels("shop", "k8s")}, []*corev1.Service{a1, v2}, "evil", a1},
		{"no members, no label", &lbplan.Actual{}, nil, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := lbgroup.GroupHome(tt.lb, tt.members)
			if home != tt.wantHome {
				t.Errorf("GroupHome = %q, want %q", home, tt.wantHome)
			}
			if got := lbgroup.GroupLeader(tt.members, home); got != tt.wantLeader {
				t.Errorf("GroupLeader = %v, want %v", got, tt.wantLeader)
			}
			if tt.wantLeader != nil {
				if got := lbgroup.LeaderFirst(tt.members, tt.wantLeader); got[0] != tt.wantLeader || len(got) != len(tt.members) {
					t.Errorf("LeaderFirst = %v, want %v first of %d", got, tt.wantLeader, len(tt.members))
				}
			}
		})
	}
}
