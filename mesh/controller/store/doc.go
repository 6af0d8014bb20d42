// Package store is the controller's state: the contract every store
// keeps (Store, Reader, Tx, SubTx), every record it holds (secrets,
// tokens, nodes, persons, builds, the ledger, declarations, reports,
// status, liveness, dead letters, refusals) with its checks and folds,
// and the first implementation, the state directory (FileStore).
// pgstore keeps the same contract in PostgreSQL, and storetest is the
// contract written once.
package store
