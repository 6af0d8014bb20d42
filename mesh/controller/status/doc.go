// Package status folds what the bus says into the store: the
// provisioners' events into the status (FollowStatus), dead letters
// (FollowDead) and the nodes' heartbeats (ListenLiveness); NodesStatus
// reads it back, node by node.
package status
