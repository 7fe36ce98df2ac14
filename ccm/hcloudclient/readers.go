package hcloudclient

import (
	"context"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// The reader wrappers below are what every package but the executor gets of the API. Each is a
// struct with an unexported hcloud-go client and only the Get/List/All methods the CCM uses, so
// a type assertion or conversion of a reader (or of an interface holding one) to an interface
// with a write method fails: the method set of a reader has none (the compiler keeps that;
// TestReaders_haveNoWriteMethod lists the method sets). Get the readers from a [Conn]; the
// zero value is not usable, and consumers check theirs for nil when they are built.

// LoadBalancerReader reads load balancers.
type LoadBalancerReader struct{ c *hcloud.LoadBalancerClient }

// LoadBalancers returns the load balancer reader of c.
func (c *Conn) LoadBalancers() *LoadBalancerReader { return &LoadBalancerReader{&c.read.LoadBalancer} }

// GetByID returns the load balancer with the given ID, or nil when it does not exist.
func (r *LoadBalancerReader) GetByID(ctx context.Context, id int64) (*hcloud.LoadBalancer, *hcloud.Response, error) {
	return r.c.GetByID(ctx, id)
}

// GetByName returns the load balancer with the given name, or nil when it does not exist.
func (r *LoadBalancerReader) GetByName(ctx context.Context, name string) (*hcloud.LoadBalancer, *hcloud.Response, error) {
	return r.c.GetByName(ctx, name)
}

// List returns one page of load balancers.
func (r *LoadBalancerReader) List(ctx context.Context, opts hcloud.LoadBalancerListOpts) ([]*hcloud.LoadBalancer, *hcloud.Response, error) {
	return r.c.List(ctx, opts)
}

// All returns every load balancer, reading every page.
func (r *LoadBalancerReader) All(ctx context.Context) ([]*hcloud.LoadBalancer, error) {
	return r.c.All(ctx)
}

// ServerReader reads servers.
type ServerReader struct{ c *hcloud.ServerClient }

// Servers returns the server reader of c.
func (c *Conn) Servers() *ServerReader { return &ServerReader{&c.read.Server} }

// GetByID returns the server with the given ID, or nil when it does not exist.
func (r *ServerReader) GetByID(ctx context.Context, id int64) (*hcloud.Server, *hcloud.Response, error) {
	return r.c.GetByID(ctx, id)
}

// GetByName returns the server with the given name, or nil when it does not exist.
func (r *ServerReader) GetByName(ctx context.Context, name string) (*hcloud.Server, *hcloud.Response, error) {
	return r.c.GetByName(ctx, name)
}

// All returns every server, reading every page.
func (r *ServerReader) All(ctx context.Context) ([]*hcloud.Server, error) {
	return r.c.All(ctx)
}

// NetworkReader reads networks.
type NetworkReader struct{ c *hcloud.NetworkClient }

// Networks returns the network reader of c.
func (c *Conn) Networks() *NetworkReader { return &NetworkReader{&c.read.Network} }

// Get returns the network with the given ID or name, or nil when it does not exist.
func (r *NetworkReader) Get(ctx context.Context, idOrName string) (*hcloud.Network, *hcloud.Response, error) {
	return r.c.Get(ctx, idOrName)
}

// GetByID returns the network with the given ID, or nil when it does not exist.
func (r *NetworkReader) GetByID(ctx context.Context, id int64) (*hcloud.Network, *hcloud.Response, error) {
	return r.c.GetByID(ctx, id)
}

// CertificateReader reads certificates.
type CertificateReader struct{ c *hcloud.CertificateClient }

// Certificates returns the certificate reader of c.
func (c *Conn) Certificates() *CertificateReader { return &CertificateReader{&c.read.Certificate} }

// GetByName returns the certificate with the given name, or nil when it does not exist.
func (r *CertificateReader) GetByName(ctx context.Context, name string) (*hcloud.Certificate, *hcloud.Response, error) {
	return r.c.GetByName(ctx, name)
}

// List returns one page of certificates.
func (r *CertificateReader) List(ctx context.Context, opts hcloud.CertificateListOpts) ([]*hcloud.Certificate, *hcloud.Response, error) {
	return r.c.List(ctx, opts)
}

// LoadBalancerTypeReader reads load balancer types.
type LoadBalancerTypeReader struct {
	c *hcloud.LoadBalancerTypeClient
}

// LoadBalancerTypes returns the load balancer type reader of c.
func (c *Conn) LoadBalancerTypes() *LoadBalancerTypeReader {
	return &LoadBalancerTypeReader{&c.read.LoadBalancerType}
}

// All returns every load balancer type, reading every page.
func (r *LoadBalancerTypeReader) All(ctx context.Context) ([]*hcloud.LoadBalancerType, error) {
	return r.c.All(ctx)
}
