package annotation

// The load-balancer.hetzner.cloud/* annotations of the official hcloud-cloud-controller-manager,
// with the same names and semantics. The doc trailers render docs/reference/annotations.md
// (go generate): Type is what the accessor accepts, Default what applies when the annotation is
// not set, Changes the impact of changing the value on a live load balancer.
//
// The names MUST not change: Services in the field carry them.
const (
	// LBPublicIPv4 is the public IPv4 address of the load balancer. Informational: this CCM
	// neither reads nor writes it (neither does the official one).
	//
	// Type: string
	// Default: none
	// Changes: none (not read)
	LBPublicIPv4 Name = "load-balancer.hetzner.cloud/ipv4"

	// LBPublicIPv4RDNS is the reverse DNS record of the load balancer's public IPv4 address.
	// When set (an empty value too) and different from the current record it is applied with
	// change_dns_ptr. Removing the annotation restores nothing.
	//
	// Type: string
	// Default: none (the record is left alone)
	// Changes: none (change_dns_ptr)
	LBPublicIPv4RDNS Name = "load-balancer.hetzner.cloud/ipv4-rdns"

	// LBPublicIPv6 is the public IPv6 address of the load balancer. Informational: this CCM
	// neither reads nor writes it (neither does the official one).
	//
	// Type: string
	// Default: none
	// Changes: none (not read)
	LBPublicIPv6 Name = "load-balancer.hetzner.cloud/ipv6"

	// LBPublicIPv6RDNS is the reverse DNS record of the load balancer's public IPv6 address.
	// When set (an empty value too) and different from the current record it is applied with
	// change_dns_ptr. Removing the annotation restores nothing.
	//
	// Type: string
	// Default: none (the record is left alone)
	// Changes: none (change_dns_ptr)
	LBPublicIPv6RDNS Name = "load-balancer.hetzner.cloud/ipv6-rdns"

	// LBIPv6Disabled leaves the load balancer's IPv6 address out of the Service status.
	// Set this annotation if you use external-dns.
	//
	// Type: bool
	// Default: false (HCLOUD_LOAD_BALANCERS_DISABLE_IPV6)
	// Changes: none (Service status only)
	LBIPv6Disabled Name = "load-balancer.hetzner.cloud/ipv6-disabled"

	// LBName is the name of the load balancer. Identity is the hcloud-ccm/service-uid label,
	// so a changed name renames the same load balancer.
	//
	// Type: string
	// Default: the naming plugin's name, else "a" + the Service UID without dashes (32 characters)
	// Changes: none (renamed in place)
	LBName Name = "load-balancer.hetzner.cloud/name"

	// LBDisablePublicNetwork disables (true) or enables (false) the public interface of the
	// load balancer; all traffic then goes over the private network. Needs a network
	// (HCLOUD_NETWORK) and private targets. When neither the annotation nor its variable is set
	// the interface is left as it is (a new load balancer has it enabled): removing the
	// annotation restores nothing, as with the official CCM.
	//
	// Type: bool (strconv.ParseBool: true, TRUE, 1, false, ...; an empty value is invalid)
	// Default: none (HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK, else left alone)
	// Changes: new connections (public interface enabled or disabled)
	LBDisablePublicNetwork Name = "load-balancer.hetzner.cloud/disable-public-network"

	// LBDisablePrivateIngress leaves the load balancer's private IPs out of the Service status
	// (needed with IPVS kube-proxy or kube-router).
	//
	// Type: bool
	// Default: false (HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS)
	// Changes: none (Service status only)
	LBDisablePrivateIngress Name = "load-balancer.hetzner.cloud/disable-private-ingress"

	// LBUsePrivateIP makes server targets use their private IP. Needs a network.
	//
	// Type: bool
	// Default: false (HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP)
	// Changes: pool recreated (every target removed and added again)
	LBUsePrivateIP Name = "load-balancer.hetzner.cloud/use-private-ip"

	// LBPrivateIPv4 is the IPv4 address of the load balancer in the private network. Without
	// HCLOUD_NETWORK it is ignored, as with the official CCM.
	//
	// Type: IP
	// Default: none (the API picks one)
	// Changes: new connections (detached from and re-attached to the network)
	LBPrivateIPv4 Name = "load-balancer.hetzner.cloud/private-ipv4"

	// LBPrivateSubnetIPRange is the subnet of the network to attach the load balancer to. The
	// subnet must exist in the network.
	//
	// Type: CIDR
	// Default: none (HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE)
	// Changes: none on an attached load balancer (used when attaching)
	LBPrivateSubnetIPRange Name = "load-balancer.hetzner.cloud/private-subnet-ip-range"

	// LBHostname is put in the Service status instead of the load balancer's IPs, as it is
	// (an empty value too), as the official CCM does. The load balancer is reconciled whatever
	// the value; the Kubernetes API server refuses a status whose hostname is not a DNS name
	// (or is an IP address), so such a Service keeps an empty status until the value is fixed.
	//
	// Type: string
	// Default: none
	// Changes: none (Service status only)
	LBHostname Name = "load-balancer.hetzner.cloud/hostname"

	// LBSvcProtocol is the protocol of every load balancer service of this Service, in any
	// case (HTTP is http). It is always sent: removing the annotation goes back to tcp.
	//
	// Type: tcp | http | https
	// Default: tcp
	// Changes: new connections (update_service)
	LBSvcProtocol Name = "load-balancer.hetzner.cloud/protocol"

	// LBAlgorithmType is the load balancing algorithm, in any case. When neither the annotation
	// nor its variable is set the algorithm is left as it is (a new load balancer gets the API
	// default round_robin); an empty value is invalid.
	//
	// Type: round_robin | least_connections
	// Default: none (HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE, else left alone)
	// Changes: new connections (change_algorithm)
	LBAlgorithmType Name = "load-balancer.hetzner.cloud/algorithm-type"

	// LBType is the load balancer type, case-sensitive (LB21 is refused). The annotation or
	// HCLOUD_LOAD_BALANCERS_TYPE changes the type of an existing load balancer; without both,
	// the type is left as it is (lb11 on create) and every reconcile raises the Warning
	// LoadBalancerTypeUnconfigured, as with the official CCM. An empty value counts as no type
	// at all: it hides HCLOUD_LOAD_BALANCERS_TYPE (lb11, LoadBalancerTypeUnconfigured), as in
	// the official CCM. A deprecated type raises LoadBalancerTypeDeprecated on every reconcile;
	// a type that can no longer be ordered is refused, also on a load balancer that has it.
	//
	// Type: string (a load balancer type name, e.g. lb11)
	// Default: lb11 (HCLOUD_LOAD_BALANCERS_TYPE)
	// Changes: new connections (change_type)
	LBType Name = "load-balancer.hetzner.cloud/type"

	// LBLocation is the location the load balancer is created in. It wins over any network
	// zone (annotation or HCLOUD_LOAD_BALANCERS_NETWORK_ZONE). An empty value clears the
	// environment default.
	//
	// Type: string
	// Default: none (HCLOUD_LOAD_BALANCERS_LOCATION)
	// Changes: create-time only (a later change is ignored, as with the official CCM)
	LBLocation Name = "load-balancer.hetzner.cloud/location"

	// LBNetworkZone is the network zone the load balancer is created in. Any location
	// (annotation or HCLOUD_LOAD_BALANCERS_LOCATION) wins over it.
	//
	// Type: string
	// Default: none (HCLOUD_LOAD_BALANCERS_NETWORK_ZONE)
	// Changes: create-time only (a later change is ignored, as with the official CCM)
	LBNetworkZone Name = "load-balancer.hetzner.cloud/network-zone"

	// LBNodeSelector restricts the nodes that become targets. It is a Kubernetes label
	// selector (equality- or set-based); an empty value selects every node. A value that does
	// not parse fails the reconcile before any change (InvalidAnnotation event).
	//
	// Type: label selector
	// Default: none (every node)
	// Changes: none for kept nodes (targets added or removed)
	LBNodeSelector Name = "load-balancer.hetzner.cloud/node-selector"

	// LBSvcProxyProtocol enables the proxy protocol on the load balancer services; the Service
	// status then carries ipMode Proxy. When neither the annotation nor its variable is set the
	// services keep what they have (new ones get false).
	//
	// Type: bool
	// Default: none (HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL, else left alone)
	// Changes: new connections (update_service)
	LBSvcProxyProtocol Name = "load-balancer.hetzner.cloud/uses-proxyprotocol"

	// LBSvcHTTPCookieName is the sticky-session cookie name (http and https).
	//
	// Type: string
	// Default: none (API default HCLBSTICKY)
	// Changes: new connections (update_service)
	LBSvcHTTPCookieName Name = "load-balancer.hetzner.cloud/http-cookie-name"

	// LBSvcHTTPCookieLifetime is the sticky-session cookie lifetime. The official docs say int,
	// its code parses a Go duration: both are accepted here (300s, 5m, or 300 meaning seconds).
	//
	// Type: duration
	// Default: none (API default 300s)
	// Changes: new connections (update_service)
	LBSvcHTTPCookieLifetime Name = "load-balancer.hetzner.cloud/http-cookie-lifetime"

	// LBSvcHTTPTimeoutIdle is the HTTP idle timeout. The official docs say it must be between
	// 30s and 300s; the value is sent as it is and the API decides, as with the official CCM (a
	// refusal names this annotation).
	//
	// Type: duration
	// Default: none (API default)
	// Changes: new connections (update_service)
	LBSvcHTTPTimeoutIdle Name = "load-balancer.hetzner.cloud/http-timeout-idle"

	// LBSvcHTTPCertificateType is the type of the TLS certificates of https services: exactly
	// managed selects the managed certificate; any other value (Managed, a typo) means uploaded,
	// as the official CCM compares it. An https service without certificates is sent as it is
	// and the API decides.
	//
	// Type: uploaded | managed (case-sensitive)
	// Default: uploaded
	// Changes: new connections (update_service)
	LBSvcHTTPCertificateType Name = "load-balancer.hetzner.cloud/certificate-type"

	// LBSvcHTTPCertificates is a comma separated list of IDs or names of uploaded certificates.
	//
	// Type: CSV
	// Default: none
	// Changes: new connections (update_service)
	LBSvcHTTPCertificates Name = "load-balancer.hetzner.cloud/http-certificates"

	// LBSvcHTTPManagedCertificateName is the name of the managed certificate, created with the
	// hcloud-ccm/service-uid label when no certificate carries it yet.
	//
	// Type: string (an empty value means the default, as with the official CCM)
	// Default: ccm-managed-certificate-<Service UID>
	// Changes: none (read when the certificate is created; delete the certificate to recreate it)
	LBSvcHTTPManagedCertificateName Name = "load-balancer.hetzner.cloud/http-managed-certificate-name"

	// LBSvcHTTPManagedCertificateUseACMEStaging requests the managed certificate from Let's
	// Encrypt staging. Internal to Hetzner's tests in the official CCM. A value that is not a
	// bool means false, as with the official CCM.
	//
	// Type: bool
	// Default: false
	// Changes: create-time only (read when the certificate is created)
	LBSvcHTTPManagedCertificateUseACMEStaging Name = "load-balancer.hetzner.cloud/http-managed-certificate-acme-staging"

	// LBSvcHTTPManagedCertificateDomains is a comma separated list of the domains of the
	// managed certificate (required for managed certificates).
	//
	// Type: CSV
	// Default: none
	// Changes: none (read when the certificate is created; delete the certificate to recreate it)
	LBSvcHTTPManagedCertificateDomains Name = "load-balancer.hetzner.cloud/http-managed-certificate-domains"

	// LBSvcRedirectHTTP redirects HTTP to HTTPS (http and https services).
	//
	// Type: bool
	// Default: none (left alone; API default false)
	// Changes: new connections (update_service)
	LBSvcRedirectHTTP Name = "load-balancer.hetzner.cloud/http-redirect-http"

	// LBSvcHTTPStickySessions enables sticky sessions (http and https services).
	//
	// Type: bool
	// Default: none (left alone; API default false)
	// Changes: new connections (update_service)
	LBSvcHTTPStickySessions Name = "load-balancer.hetzner.cloud/http-sticky-sessions"

	// LBSvcHealthCheckProtocol is the health check protocol, in any case. Without any of the
	// health check protocol, port, interval, timeout and retries (annotation or variable) the
	// check is tcp on the node port; with one of them it defaults to the Service protocol, and
	// the http health check annotations count only for an http or https check.
	//
	// Type: tcp | http | https
	// Default: tcp, or the Service protocol once another health check setting is set
	// Changes: none (update_service; health checks only)
	LBSvcHealthCheckProtocol Name = "load-balancer.hetzner.cloud/health-check-protocol"

	// LBSvcHealthCheckPort is the health check port.
	//
	// Type: int
	// Default: the NodePort of each Service port
	// Changes: none (update_service; health checks only)
	LBSvcHealthCheckPort Name = "load-balancer.hetzner.cloud/health-check-port"

	// LBSvcHealthCheckInterval is the health check interval. The official docs say int, its
	// code parses a Go duration: both are accepted here (15s, or 15 meaning seconds).
	//
	// Type: duration
	// Default: none (HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL, else API default)
	// Changes: none (update_service; health checks only)
	LBSvcHealthCheckInterval Name = "load-balancer.hetzner.cloud/health-check-interval"

	// LBSvcHealthCheckTimeout is the timeout of one health check. The official docs say int,
	// its code parses a Go duration: both are accepted here (10s, or 10 meaning seconds).
	//
	// Type: duration
	// Default: none (HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT, else API default)
	// Changes: none (update_service; health checks only)
	LBSvcHealthCheckTimeout Name = "load-balancer.hetzner.cloud/health-check-timeout"

	// LBSvcHealthCheckRetries is the number of failed health checks before a target is
	// unhealthy.
	//
	// Type: int
	// Default: none (HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES, else API default)
	// Changes: none (update_service; health checks only)
	LBSvcHealthCheckRetries Name = "load-balancer.hetzner.cloud/health-check-retries"

	// LBSvcHealthCheckHTTPDomain is the domain of http and https health checks.
	//
	// Type: string
	// Default: none
	// Changes: none (update_service; health checks only)
	LBSvcHealthCheckHTTPDomain Name = "load-balancer.hetzner.cloud/health-check-http-domain"

	// LBSvcHealthCheckHTTPPath is the path of http and https health checks.
	//
	// Type: string
	// Default: none (API default /)
	// Changes: none (update_service; health checks only)
	LBSvcHealthCheckHTTPPath Name = "load-balancer.hetzner.cloud/health-check-http-path"

	// LBSvcHealthCheckHTTPValidateCertificate validates the targets' TLS certificate in https
	// health checks.
	//
	// Type: bool
	// Default: false
	// Changes: none (update_service; health checks only)
	LBSvcHealthCheckHTTPValidateCertificate Name = "load-balancer.hetzner.cloud/health-check-http-validate-certificate"

	// LBSvcHealthCheckHTTPStatusCodes is a comma separated list of the HTTP status codes a
	// healthy target answers with (e.g. 2??,3??).
	//
	// Type: CSV
	// Default: none (API default 2??,3??)
	// Changes: none (update_service; health checks only)
	LBSvcHealthCheckHTTPStatusCodes Name = "load-balancer.hetzner.cloud/http-status-codes"

	// LBID is reserved by the official CCM ("not used; reserved for possible future use").
	//
	// Deprecated: not read by either CCM.
	//
	// Type: string
	// Default: none
	// Changes: none (not read)
	LBID Name = "load-balancer.hetzner.cloud/id"
)

// LBGroup puts the Service on the shared load balancer of a group: every Service of type
// LoadBalancer with the same value shares one load balancer, which serves the union of their
// ports (docs/shared-load-balancers.md). This CCM's own annotation, in its own prefix: the
// official CCM has no such feature.
//
// The name MUST not change: Services in the field carry it.
//
// Type: an RFC 1123 DNS label (1 to 63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit)
// Default: none (the Service gets a load balancer of its own)
// Changes: the Service moves between its own load balancer and the group's (new addresses)
const LBGroup Name = "service.hcloud-policy-ccm.io/load-balancer-group"

// LBDeleteProtection turns the Hetzner delete protection of the load balancer on (true) or off
// (false), with change_protection. A protected load balancer is deleted by no one: not from
// the Hetzner Console or API, and not by the CCM when the Service is deleted or changes type
// (Warning event DeleteProtected, and the load balancer with its addresses stays, as with a
// protection set by hand). To let it go, set the annotation to false, wait for the sync, then
// delete the Service. This CCM's own annotation, in its own prefix: the official CCM has no
// such setting. On a load balancer group, the leader's value is in force.
//
// The name MUST not change: Services in the field carry it.
//
// Type: bool
// Default: none (the protection is left as it is; a new load balancer has none)
// Changes: none (change_protection; removing the annotation restores nothing)
const LBDeleteProtection Name = "service.hcloud-policy-ccm.io/load-balancer-delete-protection"

// All lists every official annotation of this package, in declaration order (LBGroup and
// LBDeleteProtection, this CCM's own, are not in it).
var All = []Name{
	LBPublicIPv4, LBPublicIPv4RDNS, LBPublicIPv6, LBPublicIPv6RDNS, LBIPv6Disabled, LBName,
	LBDisablePublicNetwork, LBDisablePrivateIngress, LBUsePrivateIP, LBPrivateIPv4,
	LBPrivateSubnetIPRange, LBHostname, LBSvcProtocol, LBAlgorithmType, LBType, LBLocation,
	LBNetworkZone, LBNodeSelector, LBSvcProxyProtocol, LBSvcHTTPCookieName,
	LBSvcHTTPCookieLifetime, LBSvcHTTPTimeoutIdle, LBSvcHTTPCertificateType,
	LBSvcHTTPCertificates, LBSvcHTTPManagedCertificateName,
	LBSvcHTTPManagedCertificateUseACMEStaging, LBSvcHTTPManagedCertificateDomains,
	LBSvcRedirectHTTP, LBSvcHTTPStickySessions, LBSvcHealthCheckProtocol, LBSvcHealthCheckPort,
	LBSvcHealthCheckInterval, LBSvcHealthCheckTimeout, LBSvcHealthCheckRetries,
	LBSvcHealthCheckHTTPDomain, LBSvcHealthCheckHTTPPath, LBSvcHealthCheckHTTPValidateCertificate,
	LBSvcHealthCheckHTTPStatusCodes, LBID,
}
