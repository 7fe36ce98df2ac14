package lbplan

import ()

// LabelACMEStaging asks Hetzner to issue a managed certificate from Let's Encrypt staging
// (official CCM, internal testing annotation).
const LabelACMEStaging = "HC-Use-Staging-CA"

// PendingCertificateID stands for the managed certificate that a CreateManagedCertificate
// earlier in the same plan creates; the executor replaces it with the new certificate's ID.
const PendingCertificateID int64 = 0

// ManagedCertificate is the managed (Let's Encrypt) certificate of https listeners.
type ManagedCertificate struct {
	// ID is the existing certificate's ID; PendingCertificateID when it must be created.
	ID      int64
	Name    string
	Domains []string
	Labels  map[string]string
}
