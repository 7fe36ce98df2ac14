package ciplan

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// groupsSeen records the input.group of every decision.
type groupsSeen struct{ groups []*policy.Group }

func (g *groupsSeen) Decide(_ context.Context, in policy.Input) policy.Decision {
	g.groups = append(g.groups, in.Group)
	return policy.Decision{Allowed: true}
}

func groupManifest(name string, age int, group string, ports ...int32) Manifest {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Annotations: map[string]string{string(annotation.LBGroup): group},
			CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 1, 0, age, 0, 0, time.UTC))},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Protocol: corev1.ProtocolTCP, Port: p})
	}
	return Manifest{Source: Source{File: name + ".yaml"}, Service: svc}
}

func TestRun_Group(t *testing.T) {
	m := Manifests{Services: []Manifest{
		groupManifest("b", 2, "web", 8080), groupManifest("a", 1, "web", 80, 443), groupManifest("c", 3, "web", 1, 2, 3, 4),
	}}
	seen := &groupsSeen{}
	r := Run(context.Background(), m, Options{Config: config.Config{LoadBalancer: config.LoadBalancer{Location: "fsn1", Type: "lb11"}},
		Cluster: policy.Cluster{Name: "k8s"}, Decider: seen})
	if len(r.Services) != 3 || r.Services[0].Error != "" {
		t.Fatalf("report %+v", r)
	}
	first := r.Services[0]
	if first.LoadBalancer != "k8s-group-web" || first.Exists || len(first.Steps) != 1 || first.Steps[0].Label != "create(k8s-group-web)" {
		t.Errorf("first member: %s exists=%v steps %+v", first.LoadBalancer, first.Exists, first.Steps)
	}
	ports := []int{}
	for _, s := range first.Final.Services {
		ports = append(ports, s.ListenPort)
	}
	if !reflect.DeepEqual(ports, []int{80, 443, 8080}) {
		t.Errorf("listeners %v, want the union of a's and b's (c is over lb11's 5)", ports)
	}
	want := &policy.Group{Name: "web", Namespace: "shop", Leader: policy.ServiceRef{Namespace: "shop", Name: "a"}, Members: []policy.GroupMember{
		{Namespace: "shop", Name: "a", Ports: []int{80, 443}}, {Namespace: "shop", Name: "b", Ports: []int{8080}}, {Namespace: "shop", Name: "c", Ports: []int{}},
	}, Capacity: policy.GroupCapacity{Type: "lb11", MaxServices: 5, Used: 3}}
	if len(seen.groups) != 1 || !reflect.DeepEqual(seen.groups[0], want) {
		t.Errorf("input.group = %+v, want %+v", seen.groups, want)
	}
	for _, later := range r.Services[1:] {
		if later.Error != "" || len(later.Steps) != 0 || !later.Exists {
			t.Errorf("%s: error %q steps %+v exists %v, want nothing left to do after the first member", later.Name, later.Error, later.Steps, later.Exists)
		}
	}
}

func TestRun_GroupNeverAdoptsByName(t *testing.T) {
	m := Manifests{Services: []Manifest{groupManifest("a", 1, "web", 80)}}
	st := State{LoadBalancers: []*hcloud.LoadBalancer{{ID: 7, Name: "k8s-group-web", Labels: map[string]string{lbplan.LabelServiceUID: "x"}}}}
	r := Run(context.Background(), m, Options{Config: config.Config{LoadBalancer: config.LoadBalancer{Location: "fsn1"}},
		Cluster: policy.Cluster{Name: "k8s"}, Decider: &groupsSeen{}, State: st})
	if len(r.Services) != 1 || r.Services[0].Error == "" || r.ExitCode() != ExitBadInput {
		t.Errorf("report %+v, want the name conflict as an error", r.Services)
	}
}
