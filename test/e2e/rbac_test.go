//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// deployDir is the kustomize base operators apply, relative to this package.
const deployDir = "../../deploy"

// The identity of the CCM in deploy/.
const (
	ccmNamespace      = "kube-system"
	ccmServiceAccount = "hcloud-cloud-controller-manager"
	policyConfigMap   = "hcloud-ccm-policies"
)

// TestDeployRBACIsEnoughAndLeast applies deploy/ and proves, as the CCM's ServiceAccount, that
// every API call the upstream controllers, leader election, delegated auth and the policy gate
// make is allowed, and that calls a CCM never needs are forbidden.
func TestDeployRBACIsEnoughAndLeast(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	t.Logf("kubectl apply -k %s:\n%s", deployDir, c.ApplyKustomize(t, deployDir))
	sa := clientFromKubeconfig(t, c.ServiceAccountKubeconfig(t, ccmNamespace, ccmServiceAccount))
	admin := c.Client()
	ctx := context.Background()

	// Objects the CCM works on, created by the admin.
	node := c.CreateNode(t, "rbac-node", "10.244.1.0/24", harness.WithInternalIP("10.0.0.2"))
	svc, err := admin.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service: %v", err)
	}
	if _, err := admin.CoreV1().Secrets(ccmNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hcloud"},
		StringData: map[string]string{"token": "not-a-real-token"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create secret: %v", err)
	}

	// Objects in kube-system that belong to others: the CCM's Role must not reach them.
	otherHolder, otherDuration := "kube-controller-manager-e2e", int32(15)
	if _, err := admin.CoordinationV1().Leases(ccmNamespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &otherHolder, LeaseDurationSeconds: &otherDuration},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create another Lease: %v", err)
	}
	if _, err := admin.CoreV1().ConfigMaps(ccmNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns"},
		Data:       map[string]string{"Corefile": ".:53 {}"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create another ConfigMap: %v", err)
	}

	allowed := []struct {
		name string
		call func() error
	}{
		{"list nodes", func() error {
			_, err := sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			return err
		}},
		{"watch nodes", func() error {
			w, err := sa.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"get node", func() error {
			_, err := sa.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			return err
		}},
		{"patch node (providerID, labels, taints)", func() error {
			_, err := sa.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType,
				[]byte(`{"metadata":{"labels":{"topology.kubernetes.io/region":"fsn1"}}}`), metav1.PatchOptions{})
			return err
		}},
		{"update node", func() error {
			n, err := sa.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Spec.ProviderID = "hcloud://42"
			_, err = sa.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		}},
		{"patch node status (addresses, NetworkUnavailable)", func() error {
			_, err := sa.CoreV1().Nodes().PatchStatus(ctx, node.Name,
				[]byte(`{"status":{"conditions":[{"type":"NetworkUnavailable","status":"False","reason":"RouteCreated","message":"e2e"}]}}`))
			return err
		}},
		{"list and watch services", func() error {
			if _, err := sa.CoreV1().Services("").List(ctx, metav1.ListOptions{}); err != nil {
				return err
			}
			w, err := sa.CoreV1().Services("").Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"get service", func() error {
			_, err := sa.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
			return err
		}},
		{"patch service status (ingress and finalizer)", func() error {
			patch, _ := json.Marshal(map[string]any{
				"metadata": map[string]any{"finalizers": []string{"service.kubernetes.io/load-balancer-cleanup"}},
				"status":   map[string]any{"loadBalancer": map[string]any{"ingress": []map[string]any{{"ip": "192.0.2.10"}}}},
			})
			_, err := sa.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
			return err
		}},
		{"patch a Service's annotation through status (the policy retry marker)", func() error {
			_, err := sa.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"service.hcloud-policy-ccm.io/policy-retry":"e2e"}}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"list and watch namespaces", func() error {
			if _, err := sa.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
				return err
			}
			w, err := sa.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"get, list and watch the policy ConfigMap", func() error {
			if _, err := sa.CoreV1().ConfigMaps(ccmNamespace).Get(ctx, policyConfigMap, metav1.GetOptions{}); err != nil {
				return err
			}
			sel := metav1.ListOptions{FieldSelector: "metadata.name=" + policyConfigMap}
			if _, err := sa.CoreV1().ConfigMaps(ccmNamespace).List(ctx, sel); err != nil {
				return err
			}
			w, err := sa.CoreV1().ConfigMaps(ccmNamespace).Watch(ctx, sel)
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"get extension-apiserver-authentication ConfigMap", func() error {
			_, err := sa.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
			return err
		}},
		{"create and patch a core event on a Service", func() error {
			ev, err := sa.CoreV1().Events(svc.Namespace).Create(ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "web.e2e", Namespace: svc.Namespace},
				InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID},
				Reason:         "PolicyDenied", Message: "e2e", Type: corev1.EventTypeWarning, Count: 1,
				Source: corev1.EventSource{Component: "hcloud-policy-ccm"},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			_, err = sa.CoreV1().Events(svc.Namespace).Patch(ctx, ev.Name, types.StrategicMergePatchType, []byte(`{"count":2}`), metav1.PatchOptions{})
			return err
		}},
		{"create an event on a Node (cluster-scoped, in default)", func() error {
			_, err := sa.CoreV1().Events("default").Create(ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{GenerateName: "rbac-node."},
				InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: node.Name, UID: node.UID},
				Reason:         "Synced", Message: "e2e", Type: corev1.EventTypeNormal,
			}, metav1.CreateOptions{})
			return err
		}},
		{"create an events.k8s.io/v1 event", func() error {
			_, err := sa.EventsV1().Events(ccmNamespace).Create(ctx, &eventsv1.Event{
				ObjectMeta:          metav1.ObjectMeta{Name: policyConfigMap + ".e2e"},
				EventTime:           metav1.NowMicro(),
				Regarding:           corev1.ObjectReference{Kind: "ConfigMap", Namespace: ccmNamespace, Name: policyConfigMap},
				Reason:              "PolicyLoaded",
				Action:              "Load",
				Note:                "e2e",
				Type:                corev1.EventTypeNormal,
				ReportingController: "hcloud-policy-ccm",
				ReportingInstance:   "hcloud-policy-ccm-e2e",
			}, metav1.CreateOptions{})
			return err
		}},
		{"create, get and update the leader-election Lease", func() error {
			leases := sa.CoordinationV1().Leases(ccmNamespace)
			holder, duration := "e2e", int32(15)
			lease, err := leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "cloud-controller-manager"},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &duration},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			if lease, err = leases.Get(ctx, lease.Name, metav1.GetOptions{}); err != nil {
				return err
			}
			now := metav1.NowMicro()
			lease.Spec.RenewTime = &now
			_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
			return err
		}},
		{"create a TokenReview (delegated authentication)", func() error {
			_, err := sa.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
				Spec: authenticationv1.TokenReviewSpec{Token: "not-a-token"},
			}, metav1.CreateOptions{})
			return err
		}},
		{"create a SubjectAccessReview (delegated authorization)", func() error {
			_, err := sa.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{
					User:                  "someone",
					NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
				},
			}, metav1.CreateOptions{})
			return err
		}},
		// Last: the node-lifecycle controller deletes nodes whose server is gone.
		{"delete node", func() error {
			return sa.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{})
		}},
	}
	for _, tc := range allowed {
		if err := tc.call(); err != nil {
			t.Errorf("as the CCM's ServiceAccount, %s: want allowed, got %v", tc.name, err)
		}
	}

	forbidden := []struct {
		name string
		call func() error
	}{
		{"delete a namespace", func() error {
			return sa.CoreV1().Namespaces().Delete(ctx, "default", metav1.DeleteOptions{})
		}},
		{"list secrets in kube-system", func() error {
			_, err := sa.CoreV1().Secrets(ccmNamespace).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"get the hcloud token Secret", func() error {
			_, err := sa.CoreV1().Secrets(ccmNamespace).Get(ctx, "hcloud", metav1.GetOptions{})
			return err
		}},
		{"list secrets in all namespaces", func() error {
			_, err := sa.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"create a node", func() error {
			_, err := sa.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}}, metav1.CreateOptions{})
			return err
		}},
		{"update a service's spec", func() error {
			_, err := sa.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.StrategicMergePatchType,
				[]byte(`{"spec":{"type":"ClusterIP"}}`), metav1.PatchOptions{})
			return err
		}},
		{"delete a service", func() error {
			return sa.CoreV1().Services(svc.Namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{})
		}},
		{"read ConfigMaps outside kube-system", func() error {
			_, err := sa.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"write the policy ConfigMap", func() error {
			_, err := sa.CoreV1().ConfigMaps(ccmNamespace).Patch(ctx, policyConfigMap, types.MergePatchType,
				[]byte(`{"data":{"allow.rego":"package ccm"}}`), metav1.PatchOptions{})
			return err
		}},
		{"get another Lease in kube-system", func() error {
			_, err := sa.CoordinationV1().Leases(ccmNamespace).Get(ctx, "kube-controller-manager", metav1.GetOptions{})
			return err
		}},
		{"update another Lease in kube-system (steal its leadership)", func() error {
			lease, err := admin.CoordinationV1().Leases(ccmNamespace).Get(ctx, "kube-controller-manager", metav1.GetOptions{})
			if err != nil {
				return err
			}
			holder := "hcloud-policy-ccm"
			lease.Spec.HolderIdentity = &holder
			_, err = sa.CoordinationV1().Leases(ccmNamespace).Update(ctx, lease, metav1.UpdateOptions{})
			return err
		}},
		{"list leases in kube-system", func() error {
			_, err := sa.CoordinationV1().Leases(ccmNamespace).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"get another ConfigMap in kube-system", func() error {
			_, err := sa.CoreV1().ConfigMaps(ccmNamespace).Get(ctx, "coredns", metav1.GetOptions{})
			return err
		}},
		{"list ConfigMaps in kube-system without a name selector", func() error {
			_, err := sa.CoreV1().ConfigMaps(ccmNamespace).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"watch ConfigMaps in kube-system without a name selector", func() error {
			w, err := sa.CoreV1().ConfigMaps(ccmNamespace).Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"delete the leader-election Lease", func() error {
			return sa.CoordinationV1().Leases(ccmNamespace).Delete(ctx, "cloud-controller-manager", metav1.DeleteOptions{})
		}},
		{"create leases outside kube-system", func() error {
			_, err := sa.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		}},
		{"create a pod", func() error {
			_, err := sa.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p"},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			}, metav1.CreateOptions{})
			return err
		}},
		{"create a serviceaccount token", func() error {
			_, err := sa.CoreV1().ServiceAccounts(ccmNamespace).CreateToken(ctx, ccmServiceAccount,
				&authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			return err
		}},
		{"create a serviceaccount", func() error {
			_, err := sa.CoreV1().ServiceAccounts(ccmNamespace).Create(ctx, &corev1.ServiceAccount{
				ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		}},
		{"bind itself to cluster-admin", func() error {
			_, err := sa.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "escalate"},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ccmNamespace, Name: ccmServiceAccount}},
			}, metav1.CreateOptions{})
			return err
		}},
	}
	for _, tc := range forbidden {
		if err := tc.call(); !apierrors.IsForbidden(err) {
			t.Errorf("as the CCM's ServiceAccount, %s: want Forbidden, got %v", tc.name, err)
		}
	}

	// The status patch above went through: the finalizer and ingress are on the Service.
	got, err := admin.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get service: %v", err)
	}
	if diff := cmp.Diff([]string{"service.kubernetes.io/load-balancer-cleanup"}, got.Finalizers); diff != "" {
		t.Errorf("service finalizers after the status patch (-want +got):\n%s", diff)
	}
	if len(got.Status.LoadBalancer.Ingress) != 1 || got.Status.LoadBalancer.Ingress[0].IP != "192.0.2.10" {
		t.Errorf("service ingress after the status patch = %+v, want 192.0.2.10", got.Status.LoadBalancer.Ingress)
	}
}

// TestCreateNodeLooksLikeAKubelet checks that CreateNode registers what a kubelet with
// --cloud-provider=external would: uninitialised taint, no providerID, podCIDR, Ready status.
func TestCreateNodeLooksLikeAKubelet(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	ctx := context.Background()
	c.CreateNode(t, "worker-1", "10.244.1.0/24", harness.WithInternalIP("10.0.0.3"))
	c.CreateNode(t, "worker-2", "")

	n, err := c.Client().CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node: %v", err)
	}
	var uninitialized []corev1.Taint
	for _, taint := range n.Spec.Taints {
		if taint.Key == harness.TaintUninitialized {
			uninitialized = append(uninitialized, corev1.Taint{Key: taint.Key, Value: taint.Value, Effect: taint.Effect})
		}
	}
	want := []corev1.Taint{{Key: harness.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	if diff := cmp.Diff(want, uninitialized); diff != "" {
		t.Errorf("uninitialized taint (-want +got):\n%s", diff)
	}
	if n.Spec.ProviderID != "" {
		t.Errorf("providerID = %q, want empty (the CCM sets it)", n.Spec.ProviderID)
	}
	if n.Spec.PodCIDR != "10.244.1.0/24" || !cmp.Equal(n.Spec.PodCIDRs, []string{"10.244.1.0/24"}) {
		t.Errorf("podCIDR = %q, podCIDRs = %v, want 10.244.1.0/24", n.Spec.PodCIDR, n.Spec.PodCIDRs)
	}
	if got := n.Annotations[harness.AnnotationProvidedNodeIP]; got != "10.0.0.3" {
		t.Errorf("annotation %s = %q, want 10.0.0.3", harness.AnnotationProvidedNodeIP, got)
	}
	wantAddrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.3"}, {Type: corev1.NodeHostName, Address: "worker-1"}}
	if diff := cmp.Diff(wantAddrs, n.Status.Addresses); diff != "" {
		t.Errorf("addresses (-want +got):\n%s", diff)
	}
	if !nodeReady(n) {
		t.Errorf("node conditions = %+v, want Ready=True", n.Status.Conditions)
	}

	n2, err := c.Client().CoreV1().Nodes().Get(ctx, "worker-2", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node: %v", err)
	}
	if n2.Spec.PodCIDR != "" || len(n2.Spec.PodCIDRs) != 0 {
		t.Errorf("worker-2 podCIDR = %q %v, want none", n2.Spec.PodCIDR, n2.Spec.PodCIDRs)
	}
	if diff := cmp.Diff([]corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "worker-2"}}, n2.Status.Addresses); diff != "" {
		t.Errorf("worker-2 addresses without --node-ip (-want +got):\n%s", diff)
	}

}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// clientFromKubeconfig builds a client from a kubeconfig file, as the CCM does with --kubeconfig.
func clientFromKubeconfig(t testing.TB, path string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("load kubeconfig %s: %v", path, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client from kubeconfig %s: %v", path, err)
	}
	return client
}
