//go:build soak

package soak

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// Bounds of the workload, small enough for a 2-core machine.
const (
	maxServices = 16
	minNodes    = 2
	maxNodes    = 4
)

// op is one workload operation: its name, and a function that applies it (or returns "" when
// it does not apply now) and describes what it did.
type op struct {
	name   string
	weight int
	run    func(s *soak) (string, error)
}

// workload are the operations the soak draws from, with their weights.
var workload = []op{
	{"service-create", 6, (*soak).createService},
	{"service-change", 6, (*soak).changeService},
	{"service-delete", 3, (*soak).deleteService},
	{"group-join", 5, (*soak).joinGroup},
	{"group-leave", 4, (*soak).leaveGroup},
	{"namespace-label", 3, (*soak).toggleNamespace},
	{"node-join", 2, (*soak).nodeJoin},
	{"node-leave", 2, (*soak).nodeLeave},
	{"policy-revision", 2, (*soak).policyRevision},
	{"anchor-recycle", 3, (*soak).recycleAnchor},
}

// newService builds a Service of type LoadBalancer from its model.
func newService(m *svcModel) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: m.NS, Name: m.Name, Annotations: map[string]string{}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": m.Name},
		},
	}
	applyModel(svc, m)
	return svc
}

// applyModel writes m's ports, annotations and type onto svc, keeping the node ports the
// apiserver allocated for ports that stay.
func applyModel(svc *corev1.Service, m *svcModel) {
	nodePorts := map[int32]int32{}
	for _, p := range svc.Spec.Ports {
		nodePorts[p.Port] = p.NodePort
	}
	svc.Spec.Ports = nil
	for _, p := range m.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: fmt.Sprintf("p%d", p), Port: p, TargetPort: intstr.FromInt32(p), Protocol: corev1.ProtocolTCP,
			NodePort: nodePorts[p],
		})
	}
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	setAnnotation(svc, annotationGroup, m.Group)
	setAnnotation(svc, annotationAlgorithm, m.Algorithm)
	sel := ""
	if m.Selector != "" {
		sel = labelPool + "=" + m.Selector
	}
	setAnnotation(svc, annotationNodeSelector, sel)
	if m.LB {
		svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	} else {
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
	}
}

func setAnnotation(svc *corev1.Service, key, value string) {
	if value == "" {
		delete(svc.Annotations, key)
	} else {
		svc.Annotations[key] = value
	}
}

// create stores a new Service of model m and records its UID.
func (s *soak) create(m *svcModel) error {
	created, err := s.c.Client().CoreV1().Services(m.NS).Create(context.Background(), newService(m), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create service %s: %w", m.Key(), err)
	}
	m.UID = string(created.UID)
	m.Seq = s.model.nextSvc
	s.model.services[m.Key()] = m
	return nil
}

// update writes m onto the stored Service, retrying on conflicts (the CCM writes its status).
func (s *soak) update(m *svcModel) error {
	services := s.c.Client().CoreV1().Services(m.NS)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := services.Get(context.Background(), m.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		applyModel(svc, m)
		_, err = services.Update(context.Background(), svc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("update service %s: %w", m.Key(), err)
	}
	return nil
}

// randomPorts draws the ports of a new Service: mostly 80 and 443, sometimes 8080, which only
// a relaxed policy revision allows.
func (s *soak) randomPorts() []int32 {
	switch s.rnd.IntN(6) {
	case 0:
		return []int32{80}
	case 1:
		return []int32{443}
	case 2, 3:
		return []int32{80, 443}
	case 4:
		return []int32{8080}
	default:
		return []int32{443, 8080}
	}
}

func (s *soak) createService() (string, error) {
	if len(s.model.services) >= maxServices {
		return "", nil
	}
	s.model.nextSvc++
	m := &svcModel{NS: serviceNamespace[s.rnd.IntN(len(serviceNamespace))], Name: fmt.Sprintf("svc-%d", s.model.nextSvc),
		Ports: s.randomPorts(), LB: true}
	if s.rnd.IntN(4) == 0 {
		m.Selector = []string{"a", "b"}[s.rnd.IntN(2)]
	}
	if err := s.create(m); err != nil {
		return "", err
	}
	return fmt.Sprintf("created %s ports %v pool %q", m.Key(), m.Ports, m.Selector), nil
}

func (s *soak) changeService() (string, error) {
	m := s.model.pick(s.rnd, func(m *svcModel) bool { return !m.Anchor })
	if m == nil {
		return "", nil
	}
	var what string
	switch s.rnd.IntN(4) {
	case 0:
		if m.Group != "" {
			return "", nil // a member's ports are chosen at join (see joinGroup)
		}
		m.Ports = s.randomPorts()
		what = fmt.Sprintf("ports %v", m.Ports)
	case 1:
		m.Selector = []string{"", "a", "b"}[s.rnd.IntN(3)]
		what = fmt.Sprintf("node pool %q", m.Selector)
	case 2:
		m.Algorithm = map[string]string{"": "least_connections", "least_connections": ""}[m.Algorithm]
		what = fmt.Sprintf("algorithm %q", m.Algorithm)
	default:
		if m.Group != "" && m.NS == groupHome[m.Group].ns && !m.LB && s.homePortTaken(m) {
			return "", nil
		}
		m.LB = !m.LB
		if !m.LB {
			s.model.typeChanged[m.UID] = true
		}
		what = fmt.Sprintf("type LoadBalancer=%v", m.LB)
	}
	if err := s.update(m); err != nil {
		return "", err
	}
	return fmt.Sprintf("changed %s: %s", m.Key(), what), nil
}

// homePortTaken reports whether another home member of m's group uses one of m's ports.
func (s *soak) homePortTaken(m *svcModel) bool {
	for _, p := range s.model.homePorts(m.Group) {
		if slices.Contains(m.Ports, p) {
			return true
		}
	}
	return false
}

func (s *soak) deleteService() (string, error) {
	m := s.model.pick(s.rnd, func(m *svcModel) bool { return !m.Anchor })
	if m == nil {
		return "", nil
	}
	return s.remove(m)
}

// remove deletes m's Service.
func (s *soak) remove(m *svcModel) (string, error) {
	err := s.c.Client().CoreV1().Services(m.NS).Delete(context.Background(), m.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("delete service %s: %w", m.Key(), err)
	}
	delete(s.model.services, m.Key())
	s.model.deletedUIDs[m.UID] = m.Key()
	return "deleted " + m.Key(), nil
}

// joinGroup creates a new member of a group: in the group's home with the one of 80 and 443
// that no home member uses, or (half the time, or when both are taken) in another namespace,
// where the policy refuses it.
func (s *soak) joinGroup() (string, error) {
	if len(s.model.services) >= maxServices {
		return "", nil
	}
	groups := []string{"shop", "pay", "tmp"}
	g := groups[s.rnd.IntN(len(groups))]
	home := groupHome[g].ns
	taken := s.model.homePorts(g)
	s.model.nextSvc++
	m := &svcModel{Name: fmt.Sprintf("m-%d", s.model.nextSvc), Group: g, LB: true}
	free := slices.DeleteFunc([]int32{80, 443}, func(p int32) bool { return slices.Contains(taken, p) })
	switch {
	case len(free) > 0 && (g == "tmp" || s.rnd.IntN(2) == 0):
		m.NS, m.Ports = home, free[:1]
	case g == "tmp":
		return "", nil // tmp's home is full, and tmp takes no member from elsewhere
	default:
		others := slices.DeleteFunc(slices.Clone(serviceNamespace), func(ns string) bool { return ns == home })
		m.NS, m.Ports = others[s.rnd.IntN(len(others))], []int32{[]int32{80, 443, 8443}[s.rnd.IntN(3)]}
	}
	if err := s.create(m); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s joined group %s (home %s) with port %v", m.Key(), g, home, m.Ports), nil
}

// leaveGroup deletes a member that is not an anchor, or takes its group annotation away.
func (s *soak) leaveGroup() (string, error) {
	m := s.model.pick(s.rnd, func(m *svcModel) bool { return m.Group != "" && !m.Anchor })
	if m == nil {
		return "", nil
	}
	if s.rnd.IntN(2) == 0 {
		return s.remove(m)
	}
	g := m.Group
	m.Group = ""
	if err := s.update(m); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s left group %s (annotation removed)", m.Key(), g), nil
}

// recycleAnchor replaces the anchor of group shop or pay by a new home member with the same
// port, created first and then the old one deleted: the group never lacks a member at home,
// but its oldest member may now be one of another namespace (a refused one), from which the
// home must never be derived again (issue 40 §3).
func (s *soak) recycleAnchor() (string, error) {
	g := []string{"shop", "pay"}[s.rnd.IntN(2)]
	old := s.model.pick(s.rnd, func(m *svcModel) bool { return m.Anchor && m.Group == g })
	if old == nil {
		return "", nil
	}
	s.model.nextSvc++
	m := &svcModel{NS: old.NS, Name: fmt.Sprintf("%s-%d", groupHome[g].anchor, s.model.nextSvc), Ports: old.Ports, Group: g, LB: true, Anchor: true}
	if err := s.create(m); err != nil {
		return "", err
	}
	if _, err := s.remove(old); err != nil {
		return "", err
	}
	return fmt.Sprintf("group %s: anchor %s replaced by %s", g, old.Key(), m.Key()), nil
}

func (s *soak) toggleNamespace() (string, error) {
	ns := toggled[s.rnd.IntN(len(toggled))]
	public := !s.model.public[ns]
	if public {
		s.model.everPublicNS[ns] = true // before the label: the CCM may act on it at once
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := s.c.Client().CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		if public {
			n.Labels[labelPublic] = "true"
		} else {
			delete(n.Labels, labelPublic)
		}
		_, err = s.c.Client().CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("label namespace %s: %w", ns, err)
	}
	s.model.public[ns] = public
	return fmt.Sprintf("namespace %s public=%v", ns, public), nil
}

func (s *soak) nodeJoin() (string, error) {
	if len(s.model.nodes) >= maxNodes {
		return "", nil
	}
	return s.addNode()
}

// addNode registers a new server and its Node, in pool a or b.
func (s *soak) addNode() (string, error) {
	s.model.nextNode++
	n := nodeModel{Name: fmt.Sprintf("node-%d", s.model.nextNode), Pool: []string{"a", "b"}[s.model.nextNode%2]}
	id, err := s.emu.AddServer(hcloudemu.ServerSpec{Name: n.Name})
	if err != nil {
		return "", fmt.Errorf("add server %s: %w", n.Name, err)
	}
	n.ServerID = id
	if err := registerNode(s.c, n); err != nil {
		return "", err
	}
	s.model.nodes = append(s.model.nodes, n)
	return fmt.Sprintf("node %s (server %d, pool %s) joined", n.Name, id, n.Pool), nil
}

func (s *soak) nodeLeave() (string, error) {
	if len(s.model.nodes) <= minNodes {
		return "", nil
	}
	i := s.rnd.IntN(len(s.model.nodes))
	n := s.model.nodes[i]
	if err := s.c.Client().CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}); err != nil {
		return "", fmt.Errorf("delete node %s: %w", n.Name, err)
	}
	if err := s.emu.DeleteServer(n.ServerID); err != nil {
		return "", fmt.Errorf("delete server %d: %w", n.ServerID, err)
	}
	s.model.nodes = slices.Delete(s.model.nodes, i, i+1)
	return fmt.Sprintf("node %s (server %d) left", n.Name, n.ServerID), nil
}

// Policy revisions: data.json's listen_ports without and with 8080.
const (
	portsTight   = `"listen_ports": [80, 443]`
	portsRelaxed = `"listen_ports": [80, 443, 8080]`
)

func (s *soak) policyRevision() (string, error) {
	relax := !s.model.extraPort
	from, to := portsTight, portsRelaxed
	if !relax {
		from, to = portsRelaxed, portsTight
	}
	cms := s.c.Client().CoreV1().ConfigMaps(ccmNamespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(context.Background(), policyConfigMap, metav1.GetOptions{})
		if err != nil {
			return err
		}
		data := cm.Data["data.json"]
		if !strings.Contains(data, from) {
			return fmt.Errorf("data.json lacks %s", from)
		}
		cm.Data["data.json"] = strings.Replace(data, from, to, 1)
		_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("policy revision: %w", err)
	}
	s.model.extraPort = relax
	return fmt.Sprintf("policy revision: 8080 allowed=%v", relax), nil
}

// registerNode creates the Node of n as a kubelet with --cloud-provider=external registers
// it, with its pool label, and writes a Ready status (retried on conflicts: the CCM may
// initialise it between the two writes).
func registerNode(c *harness.Cluster, n nodeModel) error {
	ctx := context.Background()
	nodes := c.Client().CoreV1().Nodes()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{
			"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", labelPool: n.Pool,
		}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: harness.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	}
	if _, err := nodes.Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("register node %s: %w", n.Name, err)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := nodes.Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now}}
		if len(cur.Status.Addresses) == 0 {
			cur.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n.Name}}
		}
		_, err = nodes.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("register node %s: status: %w", n.Name, err)
	}
	return nil
}
