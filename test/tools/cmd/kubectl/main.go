// Command kubectl is the upstream kubectl, built from the Go module proxy for the end-to-end
// tests (it renders and applies deploy/ with `kubectl apply -k`). It is a copy of
// k8s.io/kubernetes/cmd/kubectl/kubectl.go.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"

	// Import to initialize client auth plugins.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

func main() {
	// Set the verbosity before the command is built, as upstream does, so that klog works
	// while plugins and .kuberc are handled.
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) //nolint:errcheck
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		// Pretty-print the error and exit with an error.
		util.CheckErr(err)
	}
}
