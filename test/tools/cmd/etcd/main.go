// Command etcd is the upstream etcd server at the version k8s.io/kubernetes requires, built from
// the Go module proxy for the end-to-end tests. It is a copy of etcd's own main.go.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
