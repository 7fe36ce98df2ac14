package ccm

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// TestNamespacesReadable: the verbs the SelfSubjectAccessReviews deny are returned; a review
// that fails counts as allowed (the CCM reads namespaces as before).
func TestNamespacesReadable(t *testing.T) {
	tests := []struct {
		name    string
		allowed []string // verbs the API server allows
		fail    bool     // the review itself fails
		want    []string
	}{
		{name: "deploy/'s ClusterRole", allowed: []string{"get", "list", "watch"}},
		{name: "the official ClusterRole", want: []string{"list", "watch"}},
		{name: "list only", allowed: []string{"list"}, want: []string{"watch"}},
		{name: "review refused", fail: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset()
			var asked []string
			kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if tc.fail {
					return true, nil, errors.New("selfsubjectaccessreviews is forbidden")
				}
				review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
				attr := review.Spec.ResourceAttributes
				if attr == nil || attr.Resource != "namespaces" || attr.Namespace != "" {
					t.Errorf("review of %+v, want namespaces cluster-wide", attr)
					return true, review, nil
				}
				asked = append(asked, attr.Verb)
				review.Status.Allowed = slices.Contains(tc.allowed, attr.Verb)
				return true, review, nil
			})
			got := namespacesReadable(t.Context(), kube)
			if !slices.Equal(got, tc.want) {
				t.Errorf("denied verbs %v, want %v", got, tc.want)
			}
			if !tc.fail && !slices.Equal(asked, namespaceVerbs) {
				t.Errorf("asked about %v, want %v", asked, namespaceVerbs)
			}
		})
	}
}

// TestReportNamespacesForbidden: one Warning event on the policy ConfigMap naming the missing
// verbs and the fix; none without a ConfigMap (the log line says it then).
func TestReportNamespacesForbidden(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	reportNamespacesForbidden(rec, "kube-system/hcloud-ccm-policies", []string{"list", "watch"})
	reportNamespacesForbidden(rec, "", []string{"list"})
	close(rec.Events)
	var got []string
	for ev := range rec.Events {
		got = append(got, ev)
	}
	if len(got) != 1 {
		t.Fatalf("events %v, want one", got)
	}
	for _, want := range []string{"Warning " + ReasonNamespacesForbidden, "may not list and watch namespaces", "Grant get, list and watch on namespaces", "rbac.create=true"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("event %q lacks %q", got[0], want)
		}
	}
}

// TestForbiddenNamespacesLabels: with the forbidden lister, the executor's namespace lookup is
// an error that wraps gate.ErrNamespacesForbidden and names the namespace.
func TestForbiddenNamespacesLabels(t *testing.T) {
	conn, err := hcloudclient.New(hcloudclient.Options{Config: config.HCloud{Endpoint: "http://127.0.0.1:1", Token: "unused", PollInterval: time.Millisecond, RetryInterval: time.Millisecond, Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.New(executor.Options{Conn: conn, Decider: policy.AllowAll{}, Namespaces: forbiddenNamespaces{}, Recorder: record.NewFakeRecorder(1)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.Gate().NamespaceLabels("shop")
	if !errors.Is(err, gate.ErrNamespacesForbidden) || !strings.Contains(err.Error(), `namespace "shop"`) {
		t.Errorf("NamespaceLabels: %v, want ErrNamespacesForbidden naming shop", err)
	}
}
