package loadbalancer

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// member is a member of group web, age minutes old in member order, declaring ports; served
// ones have an address in their status.
func member(name string, age int, served bool, ports []int32, ann map[annotation.Name]string) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, age, 0, 0, time.UTC)),
			Annotations:       map[string]string{string(annotation.LBGroup): "web"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}
	for k, v := range ann {
		svc.Annotations[string(k)] = v
	}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprint("p", p), Protocol: corev1.ProtocolTCP, Port: p})
	}
	if served {
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
	}
	return svc
}

// inNamespace moves svc to namespace ns.
func inNamespace(ns string, svc *corev1.Service) *corev1.Service {
	svc.Namespace = ns
	return svc
}

// deleted is svc as the informer's DeleteFunc hands it over: deletionTimestamp set.
func deleted(svc *corev1.Service) *corev1.Service {
	d := svc.DeepCopy()
	now := metav1.Now()
	d.DeletionTimestamp = &now
	return d
}

// TestToResync: after a leave only the members whose sync it changes are requeued (issue 33:
// requeueing every member at every leave made a group's delete read the load balancer once per
// member and leave).
func TestToResync(t *testing.T) {
	lb21 := map[annotation.Name]string{annotation.LBType: "lb21"}
	tests := []struct {
		name         string
		leaver       *corev1.Service
		members      []*corev1.Service
		byAnnotation bool
		want         []string
		home         string // "" means shop, the namespace of every member but where set
	}{
		{"the leader is deleted, the new one has its settings: nobody",
			deleted(member("a", 0, true, []int32{80}, nil)),
			[]*corev1.Service{member("b", 1, true, []int32{81}, nil), member("c", 2, true, []int32{82}, nil)}, false, nil, ""},
		{"the leader is deleted, the new one sets another type: the new leader",
			deleted(member("a", 0, true, []int32{80}, nil)),
			[]*corev1.Service{member("b", 1, true, []int32{81}, lb21), member("c", 2, true, []int32{82}, nil)}, false, []string{"shop/b"}, ""},
		{"the leader with a type is deleted, the new one sets none: the new leader",
			deleted(member("a", 0, true, []int32{80}, lb21)),
			[]*corev1.Service{member("b", 1, true, []int32{81}, nil)}, false, []string{"shop/b"}, ""},
		{"the leader with a managed certificate is deleted: the new leader",
			deleted(member("a", 0, true, []int32{80}, map[annotation.Name]string{annotation.LBSvcHTTPCertificateType: "managed"})),
			[]*corev1.Service{member("b", 1, true, []int32{81}, nil)}, false, []string{"shop/b"}, ""},
		{"a member that is not the leader is deleted, with other settings: nobody",
			deleted(member("b", 1, true, []int32{81}, lb21)),
			[]*corev1.Service{member("a", 0, true, []int32{80}, nil), member("c", 2, true, []int32{82}, nil)}, false, nil, ""},
		{"a served member claims a port the leaver held: it",
			deleted(member("b", 1, true, []int32{81}, nil)),
			[]*corev1.Service{member("a", 0, true, []int32{80}, nil), member("c", 2, true, []int32{82, 81}, nil)}, false, []string{"shop/c"}, ""},
		{"a member without an address (refused or denied): it",
			deleted(member("b", 1, true, []int32{81}, nil)),
			[]*corev1.Service{member("a", 0, true, []int32{80}, nil), member("c", 2, false, []int32{82}, nil)}, false, []string{"shop/c"}, ""},
		{"left by its annotation: the leader takes its listeners off",
			member("c", 2, true, []int32{82}, nil),
			[]*corev1.Service{member("a", 0, true, []int32{80}, nil), member("b", 1, true, []int32{81}, nil)}, true, []string{"shop/a"}, ""},
		{"left by its annotation, the leader unserved: once",
			member("c", 2, true, []int32{82}, nil),
			[]*corev1.Service{member("a", 0, false, []int32{80}, nil), member("b", 1, true, []int32{81}, nil)}, true, []string{"shop/a"}, ""},
		{name: "the home's leader is deleted, an older member of another namespace stays: the home's next member leads",
			leaver: deleted(inNamespace("grp", member("v1", 0, true, []int32{80}, nil))),
			members: []*corev1.Service{inNamespace("evil", member("a1", 1, true, []int32{81}, map[annotation.Name]string{annotation.LBNodeSelector: "x=y"})),
				inNamespace("grp", member("v2", 2, true, []int32{82}, lb21))},
			home: "grp", want: []string{"grp/v2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			home := tt.home
			if home == "" {
				home = "shop"
			}
			for _, m := range toResync(tt.leaver, tt.members, home, tt.byAnnotation) {
				got = append(got, lbplan.Key(m))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("toResync() = %v, want %v", got, tt.want)
			}
		})
	}
}
