package harness

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// TaintUninitialized is the taint a kubelet with --cloud-provider=external puts on its Node
// until a cloud-controller-manager has initialised it (k8s.io/cloud-provider/api).
const TaintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

// AnnotationProvidedNodeIP is the annotation with the kubelet's --node-ip when the cloud
// provider is external (k8s.io/cloud-provider/api AnnotationAlphaProvidedIPAddr).
const AnnotationProvidedNodeIP = "alpha.kubernetes.io/provided-node-ip"

// cleanupTimeout bounds one API call made by a cleanup.
const cleanupTimeout = 10 * time.Second

// NodeOption changes the Node that CreateNode registers, before it is created.
type NodeOption func(*corev1.Node)

// WithInternalIP registers the node as a kubelet started with --node-ip=ip does: the
// provided-node-ip annotation and the addresses InternalIP ip plus Hostname.
func WithInternalIP(ip string) NodeOption {
	return func(n *corev1.Node) {
		n.Annotations[AnnotationProvidedNodeIP] = ip
		n.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: ip},
			{Type: corev1.NodeHostName, Address: n.Name},
		}
	}
}

// WithLabels adds labels to the node.
func WithLabels(labels map[string]string) NodeOption {
	return func(n *corev1.Node) {
		for k, v := range labels {
			n.Labels[k] = v
		}
	}
}

// WithoutUninitializedTaint registers the node without the uninitialized taint, as a kubelet
// without --cloud-provider=external would.
func WithoutUninitializedTaint() NodeOption {
	return func(n *corev1.Node) {
		var taints []corev1.Taint
		for _, taint := range n.Spec.Taints {
			if taint.Key != TaintUninitialized {
				taints = append(taints, taint)
			}
		}
		n.Spec.Taints = taints
	}
}

// CreateNode registers a Node object the way a kubelet with --cloud-provider=external does
// (there is no kubelet: the object is all there is), and returns it as stored:
//
//   - labels kubernetes.io/hostname, kubernetes.io/os=linux, kubernetes.io/arch=amd64;
//   - the taint node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule;
//   - no spec.providerID (the CCM sets it);
//   - spec.podCIDR and spec.podCIDRs = [podCIDR] when podCIDR is not empty;
//   - status (written through the status subresource, as the kubelet does): a Ready=True
//     condition and the pressure conditions False, capacity, node info, and the Hostname
//     address only (no --node-ip; see WithInternalIP).
//
// The apiserver's TaintNodesByCondition admission may add node.kubernetes.io/not-ready until the
// Ready status is written, as in a real cluster. The Node is deleted when the test ends.
func (c *Cluster) CreateNode(t T, name, podCIDR string, opts ...NodeOption) *corev1.Node {
	t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
			Annotations: map[string]string{},
		},
		Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{Key: TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}},
		},
	}
	if podCIDR != "" {
		node.Spec.PodCIDR = podCIDR
		node.Spec.PodCIDRs = []string{podCIDR}
	}
	for _, opt := range opts {
		opt(node)
	}
	status := kubeletStatus(node.Status.Addresses)

	ctx := context.Background()
	nodes := c.client.CoreV1().Nodes()
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	t.Cleanup(func() {
		// The test may have deleted it already, or the CCM may have. Bounded: the apiserver may
		// be going away too.
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		_ = nodes.Delete(ctx, name, metav1.DeleteOptions{})
	})
	// A running CCM may initialise the Node between the create and the status update: on a
	// conflict, write the status onto the Node as it is now.
	var updated *corev1.Node
	current := created
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if current == nil {
			got, err := nodes.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			current = got
		}
		current.Status = status
		u, err := nodes.UpdateStatus(ctx, current, metav1.UpdateOptions{})
		current, updated = nil, u // a retry reads the Node again
		return err
	})
	if err != nil {
		t.Fatalf("update status of node %s: %v", name, err)
	}
	return updated
}

// kubeletStatus is the status a healthy kubelet reports.
func kubeletStatus(addresses []corev1.NodeAddress) corev1.NodeStatus {
	now := metav1.Now()
	condition := func(typ corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: status, Reason: reason, Message: message,
			LastHeartbeatTime: now, LastTransitionTime: now}
	}
	resources := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("2"),
		corev1.ResourceMemory:           resource.MustParse("4Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("40Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
	}
	return corev1.NodeStatus{
		Capacity:    resources,
		Allocatable: resources,
		Conditions: []corev1.NodeCondition{
			condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			condition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		},
		Addresses: addresses,
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion:          DefaultKubeVersion,
			OperatingSystem:         "linux",
			Architecture:            "amd64",
			OSImage:                 "Ubuntu 24.04 LTS",
			KernelVersion:           "6.8.0-generic",
			ContainerRuntimeVersion: "containerd://2.1.0",
		},
	}
}
