// Command hcloud-emulator serves the Hetzner Cloud API emulator
// (internal/hcloudemu) over plain HTTP, on loopback by default, for the demo
// and out-of-process tests.
//
//	hcloud-emulator -listen 127.0.0.1:4000 -token TOKEN -seed examples/emulator/seed.yaml
//
// It prints the endpoint to export as HCLOUD_ENDPOINT and serves until
// SIGINT or SIGTERM. The Robot webservice emulator (internal/robotemu, seeded from the seed
// file's robot: section) is served on the same listener under /robot (ROBOT_ENDPOINT).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/robotemu"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, nil)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hcloud-emulator:", err)
		os.Exit(1)
	}
}

// run parses args, starts the emulator and serves until ctx is done. ready,
// when set, receives the endpoint once the listener is open.
func run(ctx context.Context, args []string, out io.Writer, ready func(endpoint string)) error {
	fs := flag.NewFlagSet("hcloud-emulator", flag.ContinueOnError)
	fs.SetOutput(out)
	listen := fs.String("listen", "127.0.0.1:4000", "address to listen on (keep it on loopback)")
	token := fs.String("token", "emulator-token", "bearer token the API accepts")
	seed := fs.String("seed", "", "seed file (YAML or JSON) with locations, types, networks, servers, load balancers")
	actionDelay := fs.Duration("action-delay", 0, "how long every action stays running")
	commandDelays := fs.String("command-delay", "", "per-command action delays, e.g. create_load_balancer=2s,add_target=500ms")
	rateLimit := fs.Int("rate-limit", 3600, "requests per hour (token bucket refilled at rate/3600 per second); 0 = off")
	metadataServer := fs.String("metadata-server", "", "name or ID of the server the metadata service ("+hcloudemu.MetadataPath+") answers for; empty = none (404)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}

	opts := []hcloudemu.Option{
		hcloudemu.WithToken(*token),
		hcloudemu.WithActionDelay(*actionDelay),
		hcloudemu.WithRateLimit(*rateLimit),
		hcloudemu.WithMetadataServer(*metadataServer),
	}
	if *commandDelays != "" {
		for _, kv := range strings.Split(*commandDelays, ",") {
			cmd, ds, ok := strings.Cut(kv, "=")
			d, err := time.ParseDuration(ds)
			if !ok || err != nil || cmd == "" {
				return fmt.Errorf("invalid -command-delay entry %q: want command=duration", kv)
			}
			opts = append(opts, hcloudemu.WithCommandDelay(cmd, d))
		}
	}
	var robotSeed robotemu.Seed
	if *seed != "" {
		s, err := hcloudemu.LoadSeedFile(*seed)
		if err != nil {
			return err
		}
		opts = append(opts, hcloudemu.WithSeed(s))
		if s.Robot != nil {
			robotSeed = *s.Robot
		}
	}
	emu := hcloudemu.New(opts...)
	if err := emu.SeedError(); err != nil {
		return fmt.Errorf("apply seed %s: %w", *seed, err)
	}
	robot, err := robotemu.New(robotSeed)
	if err != nil {
		return fmt.Errorf("apply seed %s: %w", *seed, err)
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		log.Printf("hcloud-emulator: warning: listening on non-loopback address %s", tcp)
	}
	endpoint := "http://" + ln.Addr().String() + "/v1"
	fmt.Fprintf(out, "hcloud emulator listening\nexport HCLOUD_ENDPOINT=%s\nexport HCLOUD_TOKEN=%s\nexport HCLOUD_METADATA_ENDPOINT=%s\n",
		endpoint, *token, hcloudemu.MetadataEndpoint(endpoint))
	fmt.Fprintf(out, "export ROBOT_ENDPOINT=%s\nexport ROBOT_USER=%s\nexport ROBOT_PASSWORD=%s\n",
		robotemu.EndpointBeside(endpoint), robot.User(), robot.Password())
	if ready != nil {
		ready(endpoint)
	}

	srv := &http.Server{Handler: robotemu.Beside(emu.Handler(), robot), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
