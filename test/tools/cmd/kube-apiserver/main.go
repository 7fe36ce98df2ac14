// Command kube-apiserver is the upstream kube-apiserver, built from the Go module proxy for the
// end-to-end tests. It is a copy of k8s.io/kubernetes/cmd/kube-apiserver/apiserver.go: a main
// package cannot be imported, so the few lines are repeated here.
package main

import (
	"os"
	_ "time/tzdata" // for timeZone support in CronJob

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // load all the prometheus client-go plugins
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	command := app.NewAPIServerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
