package hcloudemu

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// renderCert adds what is computed: used_by, and the issuance status of a
// managed certificate from its create action.
func (e *Emulator) renderCert(c *schema.Certificate) schema.Certificate {
	out := *c
	out.UsedBy = []schema.CertificateUsedByRef{}
	for _, id := range sortedIDs(e.st.lbs) {
		if slices.ContainsFunc(e.st.lbs[id].Services, func(s schema.LoadBalancerService) bool {
			return s.HTTP != nil && slices.Contains(s.HTTP.Certificates, c.ID)
		}) {
			out.UsedBy = append(out.UsedBy, schema.CertificateUsedByRef{ID: id, Type: "load_balancer"})
		}
	}
	if aid, ok := e.st.issuing[c.ID]; ok {
		st := *c.Status
		a := e.st.actions[aid].render(e.now())
		switch a.Status {
		case "success":
			st.Issuance = "completed"
			out.NotValidBefore = *a.Finished
			out.NotValidAfter = a.Finished.Add(90 * 24 * time.Hour)
		case "error":
			st.Issuance = "failed"
			st.Error = &schema.Error{Code: "action_failed", Message: "certificate issuance failed"}
		}
		out.Status = &st
	}
	return out
}

func (e *Emulator) listCertificates(r *http.Request) (int, any, error) {
	types := r.URL.Query()["type"]
	items := make([]listItem, 0, len(e.st.certs))
	for _, id := range sortedIDs(e.st.certs) {
		c := e.st.certs[id]
		items = append(items, listItem{id: id, name: c.Name, labels: c.Labels, created: c.Created,
			typ:    c.Type,
			render: func() any { return e.renderCert(c) }})
	}
	return e.list(r, "certificates", items, func(it listItem) bool {
		return len(types) == 0 || slices.Contains(types, it.typ)
	})
}

func (e *Emulator) certByPath(r *http.Request) (*schema.Certificate, error) {
	id, err := pathID(r, "certificate")
	if err != nil {
		return nil, err
	}
	c, ok := e.st.certs[id]
	if !ok {
		return nil, errNotFound("certificate", id)
	}
	return c, nil
}

func (e *Emulator) getCertificate(r *http.Request) (int, any, error) {
	c, err := e.certByPath(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, schema.CertificateGetResponse{Certificate: e.renderCert(c)}, nil
}

func (e *Emulator) certNameTaken(name string, except int64) bool {
	for _, c := range e.st.certs {
		if c.Name == name && c.ID != except {
			return true
		}
	}
	return false
}

// createCertificate serves POST /v1/certificates. Uploaded certificates
// (the default type) must carry a PEM certificate and its matching private
// key and answer with a null action; managed certificates need domain_names
// and answer with a running create_certificate action, issuance completing
// with it.
func (e *Emulator) createCertificate(r *http.Request) (int, any, error) {
	var req schema.CertificateCreateRequest
	if err := decode(r, &req, false); err != nil {
		return 0, nil, err
	}
	if err := validateName(req.Name); err != nil {
		return 0, nil, err
	}
	labels := map[string]string{}
	if req.Labels != nil && *req.Labels != nil {
		labels = *req.Labels
	}
	if err := validateLabels(labels); err != nil {
		return 0, nil, err
	}
	if e.certNameTaken(req.Name, 0) {
		return 0, nil, newError(http.StatusConflict, "uniqueness_error", "certificate name %q is already used", req.Name)
	}
	c := &schema.Certificate{Name: req.Name, Labels: copyLabels(labels), Created: e.now(), UsedBy: []schema.CertificateUsedByRef{}}
	switch orDefault(req.Type, "uploaded") {
	case "uploaded":
		if err := parseUploaded(c, req.Certificate, req.PrivateKey); err != nil {
			return 0, nil, err
		}
		c.ID = e.st.nextID("certificate")
		e.st.certs[c.ID] = c
		return http.StatusCreated, schema.CertificateCreateResponse{Certificate: e.renderCert(c)}, nil
	case "managed":
		if len(req.DomainNames) == 0 {
			return 0, nil, errInvalid("domain_names", "managed certificates need at least one domain name")
		}
		c.Type = "managed"
		c.DomainNames = slices.Clone(req.DomainNames)
		c.Status = &schema.CertificateStatusRef{Issuance: "pending", Renewal: "unavailable"}
		c.ID = e.st.nextID("certificate")
		a := e.startAction(r, "create_certificate", ref("certificate", c.ID))
		e.st.certs[c.ID] = c
		e.st.issuing[c.ID] = a.id
		act := a.renderStarted()
		// Like the action, the reply shows the state at the start: pending.
		rendered := e.renderCert(c)
		rendered.Status = &schema.CertificateStatusRef{Issuance: "pending", Renewal: "unavailable"}
		return http.StatusCreated, schema.CertificateCreateResponse{Certificate: rendered, Action: &act}, nil
	default:
		return 0, nil, errInvalid("type", "type must be uploaded or managed, got %q", req.Type)
	}
}

func parseUploaded(c *schema.Certificate, certPEM, keyPEM string) *apiError {
	if certPEM == "" {
		return errInvalid("certificate", "certificate is required for uploaded certificates")
	}
	if keyPEM == "" {
		return errInvalid("private_key", "private_key is required for uploaded certificates")
	}
	if _, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM)); err != nil {
		return errInvalid("certificate", "certificate and private key do not form a valid pair: %v", err)
	}
	block, _ := pem.Decode([]byte(certPEM))
	x, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return errInvalid("certificate", "cannot parse certificate: %v", err)
	}
	sum := sha256.Sum256(x.Raw)
	hexes := make([]string, len(sum))
	for i, b := range sum {
		hexes[i] = fmt.Sprintf("%02X", b)
	}
	c.Type = "uploaded"
	c.Certificate = certPEM
	c.Fingerprint = strings.Join(hexes, ":")
	c.NotValidBefore = x.NotBefore
	c.NotValidAfter = x.NotAfter
	c.DomainNames = slices.Clone(x.DNSNames)
	if len(c.DomainNames) == 0 && x.Subject.CommonName != "" {
		c.DomainNames = []string{x.Subject.CommonName}
	}
	if c.DomainNames == nil {
		c.DomainNames = []string{}
	}
	return nil
}

func (e *Emulator) updateCertificate(r *http.Request) (int, any, error) {
	c, err := e.certByPath(r)
	if err != nil {
		return 0, nil, err
	}
	var req schema.CertificateUpdateRequest
	if err := decode(r, &req, false); err != nil {
		return 0, nil, err
	}
	if req.Name != nil {
		if err := validateName(*req.Name); err != nil {
			return 0, nil, err
		}
		if e.certNameTaken(*req.Name, c.ID) {
			return 0, nil, newError(http.StatusConflict, "uniqueness_error", "certificate name %q is already used", *req.Name)
		}
	}
	if req.Labels != nil {
		if err := validateLabels(*req.Labels); err != nil {
			return 0, nil, err
		}
	}
	if req.Name != nil {
		c.Name = *req.Name
	}
	if req.Labels != nil {
		c.Labels = copyLabels(*req.Labels)
	}
	return http.StatusOK, schema.CertificateUpdateResponse{Certificate: e.renderCert(c)}, nil
}

// deleteCertificate answers 204; a certificate still used by a load
// balancer service is refused with 422 invalid_input (emulator choice).
func (e *Emulator) deleteCertificate(r *http.Request) (int, any, error) {
	c, err := e.certByPath(r)
	if err != nil {
		return 0, nil, err
	}
	if used := e.renderCert(c).UsedBy; len(used) > 0 {
		return 0, nil, errInvalid("id", "certificate %d is used by load balancer %d", c.ID, used[0].ID)
	}
	delete(e.st.certs, c.ID)
	delete(e.st.issuing, c.ID)
	return http.StatusNoContent, nil, nil
}
