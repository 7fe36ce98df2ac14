package providerid_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/providerid"
)

func TestFromServerID(t *testing.T) {
	if got, want := providerid.FromServerID(42), "hcloud://42"; got != want {
		t.Errorf("FromServerID(42) = %q, want %q", got, want)
	}
}

func TestToServerID(t *testing.T) {
	tests := []struct {
		name            string
		providerID      string
		want            int64
		wantErr         string
		wantUnsupported bool
	}{
		{name: "a cloud provider ID gives its server ID", providerID: "hcloud://42", want: 42},
		{name: "leading zeros are accepted as by the official CCM", providerID: "hcloud://007", want: 7},
		{name: "the largest int64 is accepted", providerID: "hcloud://9223372036854775807", want: 9223372036854775807},
		{name: "an empty provider ID is an error", providerID: "", wantErr: `invalid provider ID "": unknown prefix (expect hcloud://<server-id>)`},
		{name: "another cloud's prefix is an error", providerID: "aws:///eu-west-1a/i-1", wantErr: "unknown prefix"},
		{name: "a missing server ID is an error", providerID: "hcloud://", wantErr: "missing server ID"},
		{name: "a non-numeric server ID is an error", providerID: "hcloud://abc", wantErr: "not a decimal number"},
		{name: "a signed server ID is an error", providerID: "hcloud://+1", wantErr: "not a decimal number"},
		{name: "a negative server ID is an error", providerID: "hcloud://-1", wantErr: "not a decimal number"},
		{name: "server ID zero is an error", providerID: "hcloud://0", wantErr: "out of range"},
		{name: "a server ID beyond int64 is an error", providerID: "hcloud://9223372036854775808", wantErr: "out of range"},
		{name: "a Robot provider ID is recognised as not a cloud server's", providerID: "hrobot://123", wantErr: "a robot (dedicated server) provider ID", wantUnsupported: true},
		{name: "the legacy Robot provider ID is recognised as not a cloud server's", providerID: "hcloud://bm-123", wantErr: "a robot (dedicated server) provider ID", wantUnsupported: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := providerid.ToServerID(tc.providerID)
			if tc.wantErr == "" {
				if err != nil || got != tc.want {
					t.Fatalf("ToServerID(%q) = %d, %v, want %d", tc.providerID, got, err, tc.want)
				}
				return
			}
			var perr *providerid.Error
			if !errors.As(err, &perr) {
				t.Fatalf("ToServerID(%q) error = %v, want a *providerid.Error", tc.providerID, err)
			}
			if got := err.Error(); !strings.Contains(got, tc.wantErr) {
				t.Errorf("error = %q, want it to contain %q", got, tc.wantErr)
			}
			if errors.Is(err, providerid.ErrUnsupported) != tc.wantUnsupported {
				t.Errorf("errors.Is(err, ErrUnsupported) = %v, want %v", !tc.wantUnsupported, tc.wantUnsupported)
			}
		})
	}
}

func FuzzRoundTrip(f *testing.F) {
	for _, id := range []int64{1, 42, 9223372036854775807} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id int64) {
		if id <= 0 {
			return
		}
		got, err := providerid.ToServerID(providerid.FromServerID(id))
		if err != nil || got != id {
			t.Fatalf("round trip of %d = %d, %v", id, got, err)
		}
	})
}

func FuzzToServerID(f *testing.F) {
	for _, s := range []string{"hcloud://1", "hrobot://1", "hcloud://bm-1", "", "hcloud://", "hcloud://x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := providerid.ToServerID(s)
		if err != nil {
			return
		}
		if id <= 0 {
			t.Fatalf("ToServerID(%q) = %d without error", s, id)
		}
		// Leading zeros are accepted (as by the official CCM), so compare IDs, not strings.
		if back, err := providerid.ToServerID(providerid.FromServerID(id)); err != nil || back != id {
			t.Fatalf("ToServerID(%q) = %d, but the round trip gives %d, %v", s, id, back, err)
		}
	})
}

func TestToRobotServerNumber(t *testing.T) {
	tests := []struct {
		name       string
		providerID string
		want       int
		wantErr    string
	}{
		{name: "hrobot:// gives the server number", providerID: "hrobot://321", want: 321},
		{name: "the legacy hcloud://bm- gives the server number", providerID: "hcloud://bm-321", want: 321},
		{name: "a cloud provider ID is an error", providerID: "hcloud://321", wantErr: "not a robot provider ID"},
		{name: "an empty provider ID is an error", providerID: "", wantErr: "not a robot provider ID"},
		{name: "a missing number is an error", providerID: "hrobot://", wantErr: "not a decimal number"},
		{name: "a non-numeric number is an error", providerID: "hcloud://bm-x1", wantErr: "not a decimal number"},
		{name: "number zero is an error", providerID: "hrobot://0", wantErr: "out of range"},
		{name: "a number beyond int32 is an error", providerID: "hrobot://2147483648", wantErr: "out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := providerid.ToRobotServerNumber(tc.providerID)
			if tc.wantErr == "" {
				if err != nil || got != tc.want {
					t.Fatalf("ToRobotServerNumber(%q) = %d, %v, want %d", tc.providerID, got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ToRobotServerNumber(%q) error = %v, want one containing %q", tc.providerID, err, tc.wantErr)
			}
		})
	}
}

func FuzzRoundTripRobot(f *testing.F) {
	for _, n := range []int{1, 321, 2147483647} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int) {
		if n <= 0 || n > 2147483647 {
			return
		}
		id := providerid.FromRobotServerNumber(n)
		got, err := providerid.ToRobotServerNumber(id)
		if err != nil || got != n || !providerid.IsRobot(id) {
			t.Fatalf("round trip of %d via %q = %d, %v", n, id, got, err)
		}
		if _, err := providerid.ToServerID(id); !errors.Is(err, providerid.ErrUnsupported) {
			t.Fatalf("ToServerID(%q) error = %v, want ErrUnsupported", id, err)
		}
	})
}
