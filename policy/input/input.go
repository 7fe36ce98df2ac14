// Package input holds the policy input schema: the Go types of the document every policy
// decides on (Input and the types it reaches), the schema version and the action names.
//
// It is a leaf: it imports the standard library only, never OPA or client-go, so that the
// pure planners (ccm/lbplan, ccm/lbservice, ccm/lbgroup, ccm/routeplan) that build inputs link
// neither (TestPlannersAreLight in ccm/lbplan fails when they do). Every package, the engine
// (policy) included, names these types here: each has one name.
//
// Field names are the policy contract (docs/policy.md); docs/reference/policy-input.md and
// docs/policy-input.schema.json are generated from this file by `make generate`.
package input

// InputVersion is the version of the Input schema. It changes only when a field changes meaning
// or disappears; new optional fields keep the version.
//
// It MUST not change for additive changes: operators' policies match on it.
const InputVersion = "v1"

// Actions: the stable names of mutation kinds, used in Input.Action, metrics and events.
// They MUST not change: operators' policies match on them.
const (
	ActionLoadBalancerCreate = "loadbalancer.create"
	ActionLoadBalancerUpdate = "loadbalancer.update"
	ActionLoadBalancerDelete = "loadbalancer.delete"
	ActionRouteCreate        = "route.create"
	ActionRouteDelete        = "route.delete"
)

// Input is the document a policy decides on: one mutation of Hetzner Cloud.
//
// Field names are the policy contract (see docs/policy.md); they MUST not be renamed.
type Input struct {
	// Version is the version of this schema, InputVersion ("v1").
	Version string `json:"version"`
	// Action is the kind of mutation, one of the Action* constants (see Actions).
	Action string `json:"action"`
	// Operation is the concrete Hetzner operation, one of Operations (generated from the
	// mutation kinds). "update" sets name and labels; "create_managed_certificate" has the
	// action "loadbalancer.update".
	//
	// One decision is one API request. A create carries the listeners and targets that are sent
	// in its request body (they are in load_balancer.services and load_balancer.targets); only
	// listeners and targets sent by a request of their own are "add_service" and "add_target"
	// decisions.
	Operation string `json:"operation"`
	// Cluster describes the cluster the CCM runs for.
	Cluster Cluster `json:"cluster"`
	// Service is the Kubernetes Service a load balancer mutation is for; nil for routes, and
	// for the delete of a load balancer group's load balancer that has no member left (the
	// CCM's sweep of orphaned groups: no Service acts, Group names the group).
	Service *Service `json:"service"`
	// LoadBalancer is the desired load balancer after the mutation; nil for routes.
	LoadBalancer *LoadBalancer `json:"load_balancer"`
	// Current is the load balancer before the mutation; nil on create and for routes.
	Current *LoadBalancer `json:"current"`
	// Final is the load balancer after the whole plan this mutation belongs to: the same for
	// every step of one reconcile, so rules about the end state (for example "port 80 only
	// together with 443") do not fire on intermediate steps. Nil for deletes and routes.
	Final *LoadBalancer `json:"final"`
	// Route is the route being created or deleted; nil for load balancer mutations.
	Route *Route `json:"route"`
	// Target is the target an "add_target" or "remove_target" mutation adds or removes: a
	// cloud server ({"type": "server", "server_id": ...}) or, for a Robot dedicated server,
	// an IP target ({"type": "ip", "ip": ...}). Absent (not null) for other operations, so
	// the schema stays v1: policies that do not know the field are unaffected.
	Target *LBTarget `json:"target,omitempty"`
	// Listener is the listener an "add_service", "update_service" or "delete_service" mutation
	// adds, changes (as it is after the change) or deletes (as it was). Absent for other
	// operations; a create's listeners are in load_balancer.services.
	Listener *LBService `json:"listener,omitempty"`
	// Certificate is the certificate a "create_managed_certificate" mutation creates. Absent for
	// other operations.
	Certificate *Certificate `json:"certificate,omitempty"`
	// Group is the load balancer group of a shared load balancer (annotation
	// service.hcloud-policy-ccm.io/load-balancer-group, docs/shared-load-balancers.md): the
	// group as it is after the mutation's plan, with the acting Service (Service) among the
	// members unless it is being deleted or leaves. Null for a Service without the annotation
	// and for routes (additive: the schema stays v1).
	Group *Group `json:"group"`
	// Audit is true when the decision is the policy audit's (docs/policy.md, Audit): an existing
	// load balancer shown as the create that would build it today, or an existing route as its
	// add_route. Such a decision is reported (PolicyReport, event PolicyViolation, metrics),
	// never enforced, and nothing is sent. Absent (not false) for every real request, so the
	// schema stays v1: `not input.audit` holds for real requests.
	Audit bool `json:"audit,omitempty"`
	// Inventory is the load balancers this cluster manages as they are before this step (the
	// results of earlier applied steps included), with their monthly prices and totals per
	// namespace and for the cluster, from the CCM's caches (docs/policy.md, Quotas and cost).
	// Present on every load balancer decision when the policy in force names inventory or cost
	// (docs/policy.md, The quota guarantee); absent for routes, which are not priced.
	Inventory *Inventory `json:"inventory,omitempty"`
	// Cost is the monthly price of this step's load balancer before and after the step: before
	// is 0 on create, after is 0 on delete, change_type changes it. Present with Inventory;
	// absent for routes.
	Cost *Cost `json:"cost,omitempty"`
}

// Inventory is the load balancers this cluster manages, with prices and totals.
//
// Amounts are monthly, parsed from the decimal strings of the Hetzner API's prices[] entry of
// the load balancer's type and location (GET /load_balancer_types). A load balancer that names
// only a network zone is priced at the highest price among that zone's locations.
type Inventory struct {
	// Currency is the currency of every amount, "EUR".
	Currency string `json:"currency"`
	// LoadBalancers are the managed load balancers, by ID (those not created yet last, by name).
	LoadBalancers []InventoryLoadBalancer `json:"load_balancers"`
	// Namespaces are the totals per namespace; a group's load balancer counts in the group's
	// home namespace.
	Namespaces map[string]Totals `json:"namespaces"`
	// Cluster is the total of all managed load balancers.
	Cluster Totals `json:"cluster"`
}

// InventoryLoadBalancer is one managed load balancer of the inventory.
type InventoryLoadBalancer struct {
	// ID is the Hetzner load balancer ID; absent for one not created yet (plan's own creates).
	ID int64 `json:"id,omitempty"`
	// Name is the load balancer's name.
	Name string `json:"name"`
	// Owner is the Service or the load balancer group the load balancer belongs to.
	Owner Owner `json:"owner"`
	// Type is the load balancer type, e.g. "lb11".
	Type string `json:"type"`
	// Location is the location, e.g. "fsn1"; "" when only a network zone is known.
	Location string `json:"location"`
	// NetworkZone is the network zone, e.g. "eu-central"; "" when unknown.
	NetworkZone string `json:"network_zone"`
	// Listeners is the number of listeners (services).
	Listeners int `json:"listeners"`
	// Targets is the number of targets.
	Targets int `json:"targets"`
	// Price is the monthly price of the type at the location.
	Price Price `json:"price"`
}

// Owner is what a managed load balancer belongs to.
type Owner struct {
	// Kind is "service" (a Service's own load balancer) or "group" (a shared load balancer).
	Kind string `json:"kind"`
	// Namespace is the Service's namespace, or the group's home namespace.
	Namespace string `json:"namespace"`
	// Name is the Service's name, or the group's name.
	Name string `json:"name"`
}

// Price is the monthly price of one load balancer.
type Price struct {
	// Known is false when the API lists no price for the type and location (amounts are 0).
	Known bool `json:"known"`
	// MonthlyNet is the monthly price without VAT.
	MonthlyNet float64 `json:"monthly_net"`
	// MonthlyGross is the monthly price with VAT.
	MonthlyGross float64 `json:"monthly_gross"`
	// Currency is the currency, "EUR".
	Currency string `json:"currency"`
}

// Totals counts load balancers and sums their monthly prices (unknown prices count as 0).
type Totals struct {
	// LoadBalancers is the number of load balancers.
	LoadBalancers int `json:"load_balancers"`
	// ByType is the number of load balancers per type, e.g. {"lb11": 3}.
	ByType map[string]int `json:"by_type"`
	// MonthlyNet is the sum of the monthly net prices.
	MonthlyNet float64 `json:"monthly_net"`
	// MonthlyGross is the sum of the monthly gross prices.
	MonthlyGross float64 `json:"monthly_gross"`
}

// Cost is the monthly price of one step's load balancer before and after the step.
type Cost struct {
	// Currency is the currency of every amount, "EUR".
	Currency string `json:"currency"`
	// Before is the monthly price before the step; 0 on create.
	Before Amount `json:"before"`
	// After is the monthly price after the step; 0 on delete.
	After Amount `json:"after"`
	// Delta is After - Before: positive when the step adds cost.
	Delta Amount `json:"delta"`
}

// Amount is a monthly price, net and gross.
type Amount struct {
	// MonthlyNet is the monthly amount without VAT.
	MonthlyNet float64 `json:"monthly_net"`
	// MonthlyGross is the monthly amount with VAT.
	MonthlyGross float64 `json:"monthly_gross"`
}

// Group is a load balancer group: the Services that share one load balancer.
type Group struct {
	// Name is the group, the value of the load-balancer-group annotation.
	Name string `json:"name"`
	// Namespace is the group's home namespace: the namespace of its oldest member when its load
	// balancer was created, recorded on the load balancer (label
	// hcloud-policy-ccm.io/group-namespace). Leadership never moves it. Compare a member's
	// namespace with it, not with the leader's. "" only for a load balancer without the label
	// and without members (the sweep of a group without members).
	Namespace string `json:"namespace"`
	// Leader is the oldest member in the home namespace (by creation time, then
	// namespace/name), else the oldest member: its load-balancer-wide settings are in force.
	Leader ServiceRef `json:"leader"`
	// Members are the group's Services in all namespaces, oldest first.
	Members []GroupMember `json:"members"`
	// Capacity is the listener capacity of the load balancer type in force.
	Capacity GroupCapacity `json:"capacity"`
}

// ServiceRef names a Service.
type ServiceRef struct {
	// Namespace is the Service's namespace.
	Namespace string `json:"namespace"`
	// Name is the Service's name.
	Name string `json:"name"`
}

// GroupMember is one Service of a load balancer group.
type GroupMember struct {
	// Namespace is the Service's namespace.
	Namespace string `json:"namespace"`
	// Name is the Service's name.
	Name string `json:"name"`
	// Ports are the listen ports the member is served on, after port conflicts and capacity
	// ([] for a member refused as a whole, and for a member a sync of another member left out
	// because the policy denies its listeners).
	Ports []int `json:"ports"`
}

// GroupCapacity is the listener capacity of a group's load balancer.
type GroupCapacity struct {
	// Type is the load balancer type in force (the leader's).
	Type string `json:"type"`
	// MaxServices is the type's max_services (listeners); 0 when unknown.
	MaxServices int `json:"max_services"`
	// Used is the number of listeners after the plan.
	Used int `json:"used"`
}

// Certificate is a Hetzner certificate the CCM creates for an https listener.
type Certificate struct {
	// Type is "managed" (issued by Let's Encrypt for Domains).
	Type string `json:"type"`
	// Name is the certificate's name.
	Name string `json:"name"`
	// Domains are the domain names the certificate is issued for.
	Domains []string `json:"domains"`
	// Labels are the certificate's Hetzner labels.
	Labels map[string]string `json:"labels"`
}

// Cluster describes the cluster.
type Cluster struct {
	// Name is the cluster name the CCM was started with (--cluster-name).
	Name string `json:"name"`
	// ClusterCIDR is the pod CIDR of the cluster (--cluster-cidr), e.g. "10.244.0.0/16"; "" when
	// not configured.
	ClusterCIDR string `json:"cluster_cidr"`
	// Network is the cluster's private Hetzner network; null when none is configured.
	Network *Network `json:"network"`
}

// Network is the cluster's private Hetzner network (HCLOUD_NETWORK); nil when none is configured.
type Network struct {
	// ID is the Hetzner network ID.
	ID int64 `json:"id"`
	// Name is the Hetzner network name.
	Name string `json:"name"`
	// IPRange is the network's IP range, e.g. "10.0.0.0/8".
	IPRange string `json:"ip_range"`
}

// Service is the Kubernetes Service behind a load balancer.
type Service struct {
	// Namespace is the Service's namespace.
	Namespace string `json:"namespace"`
	// Name is the Service's name.
	Name string `json:"name"`
	// UID is the Service's UID.
	UID string `json:"uid"`
	// Labels are the Service's labels.
	Labels map[string]string `json:"labels"`
	// Annotations are the Service's annotations, including the load-balancer.hetzner.cloud/* ones,
	// except service.hcloud-policy-ccm.io/policy-retry, the CCM's own trigger of a retry.
	Annotations map[string]string `json:"annotations"`
	// Ports are the Service's ports.
	Ports []ServicePort `json:"ports"`
	// LoadBalancerSourceRanges is spec.loadBalancerSourceRanges; Hetzner load balancers cannot
	// enforce it.
	LoadBalancerSourceRanges []string `json:"load_balancer_source_ranges"`
	// ExternalTrafficPolicy is spec.externalTrafficPolicy: "Cluster" or "Local".
	ExternalTrafficPolicy string `json:"external_traffic_policy"`
	// LoadBalancerClass is spec.loadBalancerClass: "" for a class-less Service, else the class
	// the CCM serves (--load-balancer-class); the CCM never decides for a Service of another
	// class.
	LoadBalancerClass string `json:"load_balancer_class"`
	// NamespaceLabels are the labels of the Service's namespace ({} when it has none). When the
	// CCM cannot read them (forbidden, not in its cache) the decision is an evaluation error
	// under --policy-failure-mode, never an input with this field null.
	NamespaceLabels map[string]string `json:"namespace_labels"`
}

// ServicePort is one port of a Service.
type ServicePort struct {
	// Name is the port's name; "" for a single unnamed port.
	Name string `json:"name"`
	// Protocol is "TCP", "UDP" or "SCTP".
	Protocol string `json:"protocol"`
	// Port is the Service port, which becomes the load balancer's listen port.
	Port int32 `json:"port"`
	// NodePort is the node port the load balancer forwards to.
	NodePort int32 `json:"node_port"`
}

// LoadBalancer is a Hetzner load balancer as policies see it.
type LoadBalancer struct {
	// ID is the Hetzner load balancer ID; absent before the load balancer exists.
	ID int64 `json:"id,omitempty"`
	// Name is the load balancer's name.
	Name string `json:"name"`
	// Type is the load balancer type: "lb11", "lb21" or "lb31".
	Type string `json:"type"`
	// Location is the location, e.g. "fsn1", "nbg1", "hel1"; "" when NetworkZone is used instead.
	Location string `json:"location"`
	// NetworkZone is the network zone, e.g. "eu-central"; "" when unknown.
	NetworkZone string `json:"network_zone"`
	// Algorithm is "round_robin" or "least_connections".
	Algorithm string `json:"algorithm"`
	// PublicInterface is true when the load balancer has public IPs.
	PublicInterface bool `json:"public_interface"`
	// IPv6 is true when the load balancer's public IPv6 is used.
	IPv6 bool `json:"ipv6"`
	// Network is the attachment to the private network; null when not attached.
	Network *LBNetwork `json:"network"`
	// Services are the listeners.
	Services []LBService `json:"services"`
	// Targets are the targets.
	Targets []LBTarget `json:"targets"`
	// Labels are the Hetzner labels of the load balancer.
	Labels map[string]string `json:"labels"`
	// Protected is true when Hetzner delete protection is enabled.
	Protected bool `json:"protected"`
}

// LBNetwork is the load balancer's attachment to the private network.
type LBNetwork struct {
	// ID is the Hetzner network ID.
	ID int64 `json:"id"`
	// IPRange is the network's IP range.
	IPRange string `json:"ip_range"`
	// PrivateIP is the load balancer's private IP; "" when Hetzner assigns one.
	PrivateIP string `json:"private_ip"`
}

// LBService is one listener of a load balancer.
type LBService struct {
	// Protocol is "tcp", "http" or "https".
	Protocol string `json:"protocol"`
	// ListenPort is the port the load balancer listens on.
	ListenPort int `json:"listen_port"`
	// DestinationPort is the port on the targets (the Service's node port).
	DestinationPort int `json:"destination_port"`
	// Proxyprotocol is true when the PROXY protocol is enabled.
	Proxyprotocol bool `json:"proxyprotocol"`
	// HealthCheck is the listener's health check as the CCM sends it: the annotations
	// load-balancer.hetzner.cloud/health-check-*, else the environment defaults
	// HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL, _TIMEOUT and _RETRIES. On a listener read from
	// the API (current, and what a plan leaves unchanged) every field is the API's.
	HealthCheck LBHealthCheck `json:"health_check"`
}

// LBHealthCheck is the health check of a listener. A field that is null is not sent: Hetzner
// applies its default on create and add_service (interval 15, timeout 10, retries 3; an http
// check's path "/" and status codes ["2??", "3??"], as internal/hcloudemu models the API), and
// an update_service keeps the value the listener has (the input shows that value, as current
// does).
type LBHealthCheck struct {
	// Protocol is "tcp", "http" or "https".
	Protocol string `json:"protocol"`
	// Port is the port checked on the targets: the Service's node port unless the annotation
	// health-check-port names another.
	Port int `json:"port"`
	// Interval is the time between two checks, in whole seconds (as the API takes it); null
	// when not sent.
	Interval *int `json:"interval"`
	// Timeout is the time a check may take, in whole seconds; null when not sent.
	Timeout *int `json:"timeout"`
	// Retries is the number of failed checks before a target is unhealthy; null when not sent.
	Retries *int `json:"retries"`
	// HTTP are the settings of an http or https check; null for a tcp check.
	HTTP *LBHealthCheckHTTP `json:"http"`
}

// LBHealthCheckHTTP are the settings of an http or https health check.
type LBHealthCheckHTTP struct {
	// Domain is the Host header sent; null when not sent.
	Domain *string `json:"domain"`
	// Path is the request path, e.g. "/healthz"; null when not sent.
	Path *string `json:"path"`
	// StatusCodes are the accepted status codes, e.g. ["2??", "3??"]; null when not sent.
	StatusCodes []string `json:"status_codes"`
	// TLS is true when an https check validates the target's certificate; null when not sent.
	TLS *bool `json:"tls"`
}

// LBTarget is one target of a load balancer.
type LBTarget struct {
	// Type is "server" or "ip".
	Type string `json:"type"`
	// ServerID is the server of a "server" target; absent for "ip" targets.
	ServerID int64 `json:"server_id,omitempty"`
	// IP is the address of an "ip" target; absent for "server" targets.
	IP string `json:"ip,omitempty"`
	// UsePrivateIP is true when traffic goes to the server's private IP.
	UsePrivateIP bool `json:"use_private_ip"`
}

// Route is a route of the private network.
type Route struct {
	// Destination is the node's pod CIDR, e.g. "10.244.1.0/24".
	Destination string `json:"destination"`
	// Gateway is the node's private IP, e.g. "10.0.0.3".
	Gateway string `json:"gateway"`
	// Node is the name of the node the route leads to.
	Node string `json:"node"`
}
