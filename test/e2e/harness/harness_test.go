package harness

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

// Every test type satisfies T, so callers pass their *testing.T as before.
var (
	_ T = (*testing.T)(nil)
	_ T = (*testing.B)(nil)
	_ T = testing.TB(nil)
)

func TestStartProcessCapturesLogsAndKill(t *testing.T) {
	p := StartProcess(t, "sh", "/bin/sh", []string{"-c", "echo hello from $GREETING; exec sleep 60"}, []string{"GREETING=e2e"})
	WaitFor(t, 10*time.Second, func() (bool, error) {
		return strings.Contains(p.Logs(), "hello from e2e"), nil
	})
	if exited, _ := p.Exited(); exited {
		t.Fatal("process exited before Kill")
	}
	p.Kill()
	exited, err := p.Exited()
	if !exited || err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("after Kill: exited=%v err=%v, want exited with signal: killed", exited, err)
	}
	p.Stop() // a no-op on an exited process
}

func TestStartProcessEnvironmentIsClean(t *testing.T) {
	t.Setenv("HCLOUD_NETWORK", "from-the-shell")
	p := StartProcess(t, "env", "/bin/sh", []string{"-c", "echo network=$HCLOUD_NETWORK token=$HCLOUD_TOKEN; test -n \"$PATH\" && echo path-set"}, []string{"HCLOUD_TOKEN=t"})
	<-p.Done()
	if logs := p.Logs(); !strings.Contains(logs, "network= token=t") || !strings.Contains(logs, "path-set") {
		t.Errorf("process output %q: want HCLOUD_NETWORK unset, HCLOUD_TOKEN=t and PATH inherited", logs)
	}
}

func TestStopEndsAProcessGracefully(t *testing.T) {
	p := StartProcess(t, "sleep", "/bin/sh", []string{"-c", "exec sleep 60"}, nil)
	start := time.Now()
	p.Stop()
	if exited, _ := p.Exited(); !exited {
		t.Fatal("process still running after Stop")
	}
	if d := time.Since(start); d >= stopGrace {
		t.Errorf("Stop took %s: SIGTERM was not enough for sleep", d)
	}
}

func TestServingCertVerifiesAgainstCA(t *testing.T) {
	ca, err := newCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := newServingCert(ca, "kube-apiserver", []string{"localhost"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	client, err := newClientCert(ca, "admin", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	if _, err := serving.cert.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: pool}); err != nil {
		t.Errorf("serving certificate does not verify: %v", err)
	}
	if _, err := client.cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify: %v", err)
	}
	if got := client.cert.Subject.Organization; len(got) != 1 || got[0] != "system:masters" {
		t.Errorf("client certificate organizations = %v, want [system:masters]", got)
	}
}

func TestTail(t *testing.T) {
	if got, want := tail("a\nb\nc\n", 2), "b\nc"; got != want {
		t.Errorf("tail = %q, want %q", got, want)
	}
	if got, want := tail("a\n", 5), "a"; got != want {
		t.Errorf("tail = %q, want %q", got, want)
	}
}
