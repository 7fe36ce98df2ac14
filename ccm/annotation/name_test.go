package annotation_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
)

func newService(annotations map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Annotations: annotations}}
}

// accessor reads an annotation with the accessor the CCM uses for it and prints the value.
type accessor func(annotation.Name, *corev1.Service) (string, error)

func str[T any](f func(annotation.Name, *corev1.Service) (T, error)) accessor {
	return func(n annotation.Name, svc *corev1.Service) (string, error) {
		v, err := f(n, svc)
		return fmt.Sprint(v), err
	}
}

var (
	asString   = str(annotation.Name.String)
	asNonEmpty = str(annotation.Name.NonEmptyString)
	asBool     = str(annotation.Name.Bool)
	asInt      = str(annotation.Name.Int)
	asPort     = str(annotation.Name.Port)
	asDuration = str(annotation.Name.Duration)
	asIPv4     = str(annotation.Name.IPv4)
	asCIDR     = str(annotation.Name.CIDR)
	asCSV      = str(annotation.Name.CSV)
	asProtocol = str(annotation.Name.Protocol)
	asAlgo     = str(annotation.Name.Algorithm)
	asCertType = str(annotation.Name.CertificateType)
	asSelector = str(annotation.Name.Selector)
)

// kinds maps every annotation to the kind of value the CCM reads it as.
var kinds = map[annotation.Name]string{
	annotation.LBPublicIPv4:                              "string",
	annotation.LBPublicIPv4RDNS:                          "string",
	annotation.LBPublicIPv6:                              "string",
	annotation.LBPublicIPv6RDNS:                          "string",
	annotation.LBIPv6Disabled:                            "bool",
	annotation.LBName:                                    "nonempty",
	annotation.LBDisablePublicNetwork:                    "bool",
	annotation.LBDisablePrivateIngress:                   "bool",
	annotation.LBUsePrivateIP:                            "bool",
	annotation.LBPrivateIPv4:                             "ipv4",
	annotation.LBPrivateSubnetIPRange:                    "cidr",
	annotation.LBHostname:                                "string",
	annotation.LBSvcProtocol:                             "protocol",
	annotation.LBAlgorithmType:                           "algo",
	annotation.LBType:                                    "nonempty",
	annotation.LBLocation:                                "string",
	annotation.LBNetworkZone:                             "string",
	annotation.LBNodeSelector:                            "selector",
	annotation.LBSvcProxyProtocol:                        "bool",
	annotation.LBSvcHTTPCookieName:                       "nonempty",
	annotation.LBSvcHTTPCookieLifetime:                   "duration",
	annotation.LBSvcHTTPTimeoutIdle:                      "duration",
	annotation.LBSvcHTTPCertificateType:                  "certtype",
	annotation.LBSvcHTTPCertificates:                     "csv",
	annotation.LBSvcHTTPManagedCertificateName:           "string",
	annotation.LBSvcHTTPManagedCertificateUseACMEStaging: "bool",
	annotation.LBSvcHTTPManagedCertificateDomains:        "csv",
	annotation.LBSvcRedirectHTTP:                         "bool",
	annotation.LBSvcHTTPStickySessions:                   "bool",
	annotation.LBSvcHealthCheckProtocol:                  "protocol",
	annotation.LBSvcHealthCheckPort:                      "port",
	annotation.LBSvcHealthCheckInterval:                  "duration",
	annotation.LBSvcHealthCheckTimeout:                   "duration",
	annotation.LBSvcHealthCheckRetries:                   "int",
	annotation.LBSvcHealthCheckHTTPDomain:                "nonempty",
	annotation.LBSvcHealthCheckHTTPPath:                  "nonempty",
	annotation.LBSvcHealthCheckHTTPValidateCertificate:   "bool",
	annotation.LBSvcHealthCheckHTTPStatusCodes:           "csv",
	annotation.LBID:                                      "string",
}

// values lists good values (with how they print) and bad values per accessor.
var values = map[string]struct {
	good map[string]string
	bad  []string
}{
	"string":   {good: map[string]string{"": "", "x": "x", " a b ": " a b "}},
	"nonempty": {good: map[string]string{"lb-1": "lb-1", " lb21 ": "lb21"}, bad: []string{"", "  "}},
	"bool":     {good: map[string]string{"true": "true", "false": "false", "1": "true", "F": "false", " true ": "true"}, bad: []string{"", "yes", "on", "tru"}},
	"int":      {good: map[string]string{"3": "3", "0": "0", "-1": "-1"}, bad: []string{"", "3.5", "three", "1e3"}},
	"port":     {good: map[string]string{"1": "1", "30080": "30080", "65535": "65535"}, bad: []string{"0", "65536", "-1", "http", ""}},
	"duration": {good: map[string]string{"15s": "15s", "1m30s": "1m30s", "300": "5m0s", "0": "0s"}, bad: []string{"", "-5s", "-1", "fast", "15 s", "99999999999"}},
	"ipv4":     {good: map[string]string{"10.0.0.5": "10.0.0.5", " 10.0.0.6 ": "10.0.0.6"}, bad: []string{"", "10.0.0.256", "2001:db8::1", "10.0.0.0/24"}},
	"cidr":     {good: map[string]string{"10.0.0.0/24": "10.0.0.0/24", "10.0.1.7/24": "10.0.1.0/24"}, bad: []string{"", "10.0.0.0", "10.0.0.0/33", "net"}},
	"csv":      {good: map[string]string{"a": "[a]", "a, b,c": "[a b c]", "2??,3??": "[2?? 3??]"}, bad: []string{"", "a,,b", "a,"}},
	"protocol": {good: map[string]string{"tcp": "tcp", "http": "http", "https": "https", "TCP": "tcp", "HTTPS": "https"}, bad: []string{"", "udp", "h2"}},
	"algo":     {good: map[string]string{"round_robin": "round_robin", "least_connections": "least_connections", "Least_Connections": "least_connections"}, bad: []string{"", "random", "round-robin"}},
	"certtype": {good: map[string]string{"uploaded": "uploaded", "managed": "managed", "Managed": "uploaded", " managed": "uploaded", "": "uploaded", "letsencrypt": "uploaded"}},
	"selector": {good: map[string]string{"": "", "role=edge": "role=edge", "zone in (a,b),!gpu": "!gpu,zone in (a,b)"}, bad: []string{"=x", "a b", "in (", "!"}},
}

// readers maps each value kind of the values table to its accessor.
var readers = map[string]accessor{
	"string": asString, "nonempty": asNonEmpty, "bool": asBool, "int": asInt, "port": asPort,
	"duration": asDuration, "ipv4": asIPv4, "cidr": asCIDR, "csv": asCSV, "protocol": asProtocol,
	"algo": asAlgo, "certtype": asCertType, "selector": asSelector,
}

func TestName_EveryAnnotation(t *testing.T) {
	if len(kinds) != len(annotation.All) {
		t.Fatalf("the test table covers %d annotations, All has %d", len(kinds), len(annotation.All))
	}
	for _, n := range annotation.All {
		kind, ok := kinds[n]
		if !ok {
			t.Fatalf("annotation %s is missing in the test table", n)
		}
		read := readers[kind]
		if !strings.HasPrefix(string(n), "load-balancer.hetzner.cloud/") {
			t.Errorf("%s: wrong prefix", n)
		}
		t.Run(string(n)+" that is not set returns ErrNotSet", func(t *testing.T) {
			if _, err := read(n, newService(map[string]string{"other": "x"})); !errors.Is(err, annotation.ErrNotSet) {
				t.Errorf("err = %v, want ErrNotSet", err)
			}
			if _, err := read(n, nil); !errors.Is(err, annotation.ErrNotSet) {
				t.Errorf("nil service: err = %v, want ErrNotSet", err)
			}
		})
		for in, want := range values[kind].good {
			t.Run(fmt.Sprintf("%s accepts %q", n, in), func(t *testing.T) {
				got, err := read(n, newService(map[string]string{string(n): in}))
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if got != want {
					t.Errorf("got %q, want %q", got, want)
				}
			})
		}
		for _, in := range values[kind].bad {
			t.Run(fmt.Sprintf("%s rejects %q", n, in), func(t *testing.T) {
				_, err := read(n, newService(map[string]string{string(n): in}))
				var inv *annotation.InvalidError
				if !errors.As(err, &inv) {
					t.Fatalf("err = %v, want *InvalidError", err)
				}
				msg := err.Error()
				prefix := fmt.Sprintf("invalid value for %q: %q (expect ", string(n), in)
				if !strings.HasPrefix(msg, prefix) || inv.Name != n || inv.Value != in {
					t.Errorf("message %q does not start with %q", msg, prefix)
				}
			})
		}
	}
}

func TestName_Duration_AcceptsBareSeconds(t *testing.T) {
	svc := newService(map[string]string{string(annotation.LBSvcHealthCheckInterval): "15"})
	d, err := annotation.LBSvcHealthCheckInterval.Duration(svc)
	if err != nil || d != 15*time.Second {
		t.Fatalf("got %v, %v; want 15s", d, err)
	}
}

func TestInvalidError_Message(t *testing.T) {
	svc := newService(map[string]string{string(annotation.LBAlgorithmType): "random"})
	_, err := annotation.LBAlgorithmType.Algorithm(svc)
	want := `invalid value for "load-balancer.hetzner.cloud/algorithm-type": "random" (expect one of round_robin, least_connections)`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

// FuzzName_Accessors checks that no value crashes an accessor and that every error is either
// ErrNotSet or an *InvalidError naming the annotation and the value.
func FuzzName_Accessors(f *testing.F) {
	for _, seed := range []string{"", "15s", "300", "10.0.0.1", "10.0.0.0/24", "a,b", "role in (a,b)", "true", "\x00", "-1"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for n, kind := range kinds {
			_, err := readers[kind](n, newService(map[string]string{string(n): v}))
			if err == nil {
				continue
			}
			var inv *annotation.InvalidError
			if !errors.As(err, &inv) || inv.Name != n || inv.Value != v {
				t.Fatalf("%s(%q): unexpected error %v", n, v, err)
			}
		}
	})
}
