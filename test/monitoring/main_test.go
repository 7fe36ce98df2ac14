package monitoring

import (
	"os"
	"sync"
	"testing"
)

var (
	tempDirsMu sync.Mutex
	tempDirs   []string
)

// tempDir makes a directory that lives as long as the test binary (TestMain removes it), for
// what several tests share.
func tempDir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	tempDirsMu.Lock()
	defer tempDirsMu.Unlock()
	tempDirs = append(tempDirs, dir)
	return dir, nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range tempDirs {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}
