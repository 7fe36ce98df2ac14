package hcloudemu

import (
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Emulator is a stateful Hetzner Cloud API. All methods are safe for
// concurrent use; every request and every Go call sees one consistent state.
type Emulator struct {
	mu sync.Mutex

	// configuration, fixed after New
	token        string
	clock        Clock
	actionDelay  time.Duration
	commandDelay map[string]time.Duration
	rateLimit    int
	seeds        []Seed
	logf         func(format string, args ...any)
	randSeed     uint64
	// metadataServer is WithMetadataServer's name or ID, applied on Reset.
	metadataServer string

	// mutable, guarded by mu
	offset   time.Duration // added to clock by AdvanceClock and /_emu/clock
	st       *state
	faults   []*faultRule
	rnd      *rand.Rand
	bucket   bucket
	reqs     []*Request
	counts   map[string]int
	mutating int
	seedErr  error
	// metadataReqs counts metadata requests (not in the API request log).
	metadataReqs int

	mux     *http.ServeMux
	handler http.Handler
}

// Option configures an Emulator in New.
type Option func(*Emulator)

// WithToken sets the bearer token the API accepts (default "emulator-token").
func WithToken(token string) Option { return func(e *Emulator) { e.token = token } }

// WithClock sets the clock actions, locks and the rate limit are computed
// from (default: real time).
func WithClock(c Clock) Option { return func(e *Emulator) { e.clock = c } }

// WithActionDelay sets how long every action stays running (default 0: the
// mutation reply says running, the first poll says success).
func WithActionDelay(d time.Duration) Option { return func(e *Emulator) { e.actionDelay = d } }

// WithCommandDelay sets how long actions of one command (for example
// "add_target" or "create_load_balancer") stay running; it overrides
// WithActionDelay for that command.
func WithCommandDelay(command string, d time.Duration) Option {
	return func(e *Emulator) { e.commandDelay[command] = d }
}

// WithRateLimit sets the token bucket to perHour requests, refilled at
// perHour/3600 per second; 0 turns rate limiting off. New defaults to 3600,
// NewTestServer to off.
func WithRateLimit(perHour int) Option { return func(e *Emulator) { e.rateLimit = perHour } }

// WithSeed adds s to the initial state. Seeds are applied in order, after the
// default catalog, and again on Reset.
func WithSeed(s Seed) Option { return func(e *Emulator) { e.seeds = append(e.seeds, s) } }

// WithLogf sets where the emulator logs handler panics and seeding problems
// (default log.Printf).
func WithLogf(logf func(format string, args ...any)) Option {
	return func(e *Emulator) { e.logf = logf }
}

// WithRandSeed seeds the random source used by probabilistic faults, so runs
// are reproducible (default 1).
func WithRandSeed(seed uint64) Option { return func(e *Emulator) { e.randSeed = seed } }

// New returns an Emulator with the default catalog (locations, server types,
// load balancer types) and whatever WithSeed adds; servers, networks and load
// balancers are empty unless seeded.
//
// # Notes
//
// A seed that cannot be applied is logged and reported by SeedError; New does
// not fail, so options stay simple.
func New(opts ...Option) *Emulator {
	e := &Emulator{ //nolint:gosec // token: the emulator's documented default token, not a secret
		token:        "emulator-token",
		clock:        realClock{},
		commandDelay: map[string]time.Duration{},
		rateLimit:    3600,
		logf:         log.Printf,
		randSeed:     1,
		counts:       map[string]int{},
	}
	for _, o := range opts {
		o(e)
	}
	e.rnd = rand.New(rand.NewPCG(e.randSeed, e.randSeed)) //nolint:gosec // seeded on purpose: a test double's runs must repeat
	e.mux = e.routes()
	e.handler = e.middleware(e.mux)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.resetLocked()
	return e
}

// resetLocked rebuilds the state from the catalog and the seeds.
func (e *Emulator) resetLocked() {
	e.st = newState()
	e.faults = nil
	e.reqs = nil
	e.counts = map[string]int{}
	e.mutating = 0
	e.metadataReqs = 0
	e.bucket = newBucket(e.rateLimit, e.now())
	e.seedErr = nil
	e.st.metadataServer = e.metadataServer
	for _, s := range e.seeds {
		if err := e.applySeedLocked(s); err != nil {
			e.seedErr = err
			e.logf("hcloudemu: %v", err)
		}
	}
}

// Reset restores the initial state (catalog and seeds), and clears faults,
// the request log and the rate-limit bucket. The clock offset is kept.
func (e *Emulator) Reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.resetLocked()
}

// SeedError returns the error of the last seed that could not be applied, or nil.
func (e *Emulator) SeedError() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seedErr
}

// Handler returns the HTTP handler serving /v1, /_emu/ and the metadata
// service under MetadataPath.
func (e *Emulator) Handler() http.Handler { return e.handler }

// Token returns the bearer token the API accepts.
func (e *Emulator) Token() string { return e.token }

// Now returns the emulator's current time (its clock plus any AdvanceClock).
func (e *Emulator) Now() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now()
}

func (e *Emulator) now() time.Time { return e.clock.Now().Add(e.offset) }

// AdvanceClock moves the emulator's time forward by d, whatever its clock.
func (e *Emulator) AdvanceClock(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.offset += d
}

// NewTestServer starts the emulator on an httptest server on 127.0.0.1 and
// returns it with the endpoint to give hcloud-go ("http://127.0.0.1:PORT/v1").
// Rate limiting is off unless an option turns it on. The server is closed by
// t.Cleanup.
//
// Here's an example:
//
//	emu, endpoint := hcloudemu.NewTestServer(t)
//	client := hcloud.NewClient(hcloud.WithEndpoint(endpoint), hcloud.WithToken(emu.Token()))
func NewTestServer(t testing.TB, opts ...Option) (*Emulator, string) {
	t.Helper()
	e := New(append([]Option{WithRateLimit(0)}, opts...)...)
	srv := httptest.NewServer(e.Handler())
	t.Cleanup(srv.Close)
	return e, srv.URL + "/v1"
}
