package ccm

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
)

// ReasonNamespacesForbidden is the Warning event, on the policy ConfigMap, that says once at
// start that the CCM may not read namespaces.
const ReasonNamespacesForbidden = "NamespacesForbidden"

// namespaceVerbs are what the namespace informer needs.
var namespaceVerbs = []string{"list", "watch"}

// namespacesReadable asks the API server, once, whether the CCM may list and watch namespaces
// (a SelfSubjectAccessReview per verb, which every authenticated user may create). It returns
// the verbs denied; none when allowed, and none when the review itself fails (the CCM then reads
// namespaces as before and a refusal shows in the informer's log).
func namespacesReadable(ctx context.Context, kube kubernetes.Interface) []string {
	var denied []string
	for _, verb := range namespaceVerbs {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: "namespaces"},
		}}
		got, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			klog.V(2).InfoS("Cannot check whether the CCM may read namespaces; assuming it may", "verb", verb, "err", err)
			return nil
		}
		if !got.Status.Allowed {
			denied = append(denied, verb)
		}
	}
	return denied
}

// reportNamespacesForbidden says once that the CCM may not read namespaces: one error log line
// and, when the policies come from a ConfigMap, one Warning event on it. denied are the verbs
// refused.
func reportNamespacesForbidden(recorder record.EventRecorder, policyConfigMap string, denied []string) {
	msg := fmt.Sprintf("The CCM may not %s namespaces (RBAC): policies cannot see namespace_labels, so every load balancer decision is an evaluation error "+
		"(in dry run reported as PolicyDryRunDenied and carried out; in enforce handled by --policy-failure-mode). "+
		"Grant get, list and watch on namespaces to the CCM's ServiceAccount (the ClusterRole of deploy/chart/templates/rbac.yaml, or rbac.create=true) and restart the CCM",
		strings.Join(denied, " and "))
	klog.ErrorS(nil, msg, "missing", "namespaces: "+strings.Join(denied, ","))
	ns, name, ok := strings.Cut(policyConfigMap, "/")
	if recorder == nil || !ok {
		return
	}
	ref := &corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: ns, Name: name}
	recorder.Event(ref, corev1.EventTypeWarning, ReasonNamespacesForbidden, msg)
}

// forbiddenNamespaces is the namespace lister of a CCM that may not read namespaces: every
// lookup fails with gate.ErrNamespacesForbidden, and no informer (whose refused list and watch would
// log an error every few seconds) is started.
type forbiddenNamespaces struct{}

var _ corelisters.NamespaceLister = forbiddenNamespaces{}

func (forbiddenNamespaces) List(labels.Selector) ([]*corev1.Namespace, error) {
	return nil, gate.ErrNamespacesForbidden
}

func (forbiddenNamespaces) Get(string) (*corev1.Namespace, error) {
	return nil, gate.ErrNamespacesForbidden
}
