package harness

// T is what the harness needs of a test: *testing.T, *testing.B and testing.TB satisfy it, and so
// does a program that runs a cluster outside `go test` (cmd/ccm-demo), with a logger and a stack
// of cleanups run on exit.
//
// Fatalf must not return to its caller: *testing.T ends the test's goroutine; a program runs
// the cleanups and exits.
type T interface {
	Helper()
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
	Failed() bool
	Name() string
}
