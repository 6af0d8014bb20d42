// Package status folds what the bus says into the store: the
// provisioners' events into the status (FollowStatus), dead letters
// (FollowDead) and the nodes' heartbeats (ListenLiveness); NodesStatus
// and Installations read it back, node by node and module by module.
package status
