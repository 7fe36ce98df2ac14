// Package nodelabels keeps the labels of a node_labels plugin up to date on nodes after their
// initialisation.
//
// The upstream cloud-node controller (k8s.io/cloud-provider) applies
// InstanceMetadata.AdditionalLabels, where ccm/instances puts the plugin's labels, only while a
// node carries the node.cloudprovider.kubernetes.io/uninitialized taint, and never overwrites a
// label already on the node. Without this package a node keeps the plugin labels of the day it
// joined, even after the plugin file was replaced or the server's Hetzner labels changed.
//
// Start with [New] and [Controller.Run]; call [Controller.Trigger] after a plugin reload.
//
// Here's an example:
//
//	c, err := nodelabels.New(nodelabels.Options{
//		Client:   client,
//		Nodes:    factory.Core().V1().Nodes(),
//		Servers:  serverCache,
//		Labeler:  plugin,
//		Recorder: recorder,
//		Resync:   5 * time.Minute,
//	})
//	if err != nil {
//		return err
//	}
//	factory.Start(ctx.Done())
//	go c.Run(ctx, 1)
//
// # What a sync does
//
// Nodes are queued by name on node add events, on updates that change labels, annotations,
// the provider ID or the uninitialized taint (the controller's own patches come back as such
// updates and then find nothing to do), every Resync and on Trigger. A sync of one node:
//
//  1. skips the node while it carries the uninitialized taint (upstream initialises it, with
//     the same plugin), when its provider ID is not hcloud://<id>, and when the server does
//     not exist (node lifecycle handles that);
//  2. calls the plugin with [instances.NodeInput], the input ccm/instances builds at
//     initialisation, and uses the output as the plugin host validated it
//     ([plugins.ValidateLabels]);
//  3. drops keys the CCM sets itself (instance type, topology and failure-domain labels,
//     instance.hetzner.cloud/provided-by) and every key matching (^|\.)(kubernetes|k8s)\.io/,
//     as the upstream node controller does;
//  4. writes the difference in one JSON merge patch of labels and the ownership annotation,
//     conditional on the node's resourceVersion; when there is no difference it writes
//     nothing, so an unchanged node costs no API write.
//
// # Ownership
//
// The annotation [AnnotationPluginLabels] (node.hcloud-policy-ccm.io/plugin-labels) lists the
// keys the controller applied, sorted and comma-separated. For each key the plugin wants:
//
//   - absent from the node: added and owned;
//   - present and owned: set to the wanted value;
//   - present, not owned, same value: owned from now on (it was applied at initialisation);
//   - present, not owned, another value: left alone, and a Warning event PluginLabelConflict
//     on the Node names the key, both values and the source of each. The event is recorded
//     when a conflict appears or changes, not on every sync.
//
// Owned keys the plugin no longer wants are removed. Labels the controller does not own are
// never changed or removed, and keys in the annotation that it may not manage (see step 3)
// are ignored, so editing the annotation cannot make it delete a system label.
//
// # Failures
//
// When the plugin fails or returns invalid labels, nothing on the node changes (labels are
// never removed because a plugin failed), a Warning event PluginFailed is recorded on the
// Node, and the node is not retried until the next Resync, Trigger or node event. A failed
// server lookup or API write is retried with exponential backoff; a patch rejected because the
// node changed since it was read is retried the same way, against the new node.
//
// # Metrics
//
// hcloud_ccm_node_label_sync_total{result} counts syncs of nodes that were not skipped, one
// result each: failed (plugin failure, lookup or API error), retried (the patch was rejected
// because the node changed since it was read, as happens while the cloud-node controller
// initialises a new node; the node is synced again, so a retried sync is followed by another
// result), else conflict (at least one conflicting key, whether or not other labels were
// written), else applied (a patch was written), else unchanged. Alert on failed, not retried.
//
// # Notes
//
//   - Without a node_labels plugin there is nothing to run. Labels the controller applied stay
//     on the nodes when the plugin is removed.
//   - The plugin sees the node's current labels, including those it applied before. A plugin
//     whose output depends on its own labels may never settle; write plugins as functions of
//     the server.
//   - RBAC: get, list, watch and patch on nodes, create and patch on events; the CCM's
//     ClusterRole already grants them.
package nodelabels
