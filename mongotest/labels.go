package mongotest

// This file computes the errorLabels of a reply as mongod does when a
// failCommand fail point gives none (a fail point's errorLabels, even an
// empty array, replace them, as in mongod):
//
//   - RetryableWriteError, on a retryable write (a txnNumber without
//     autocommit) or on commitTransaction/abortTransaction, when the error
//     code or the writeConcernError code is a retriable one. A mongos never
//     adds it: its shards do. A standalone never sees a txnNumber (it
//     refuses one before the fail point), so only a replica set member
//     (WithReplicaSet) adds it.
//   - TransientTransactionError, on a command of a transaction, for the
//     codes mongod deems transient, instead of RetryableWriteError.
//   - NonResumableChangeStreamError, for the codes of that category.
//
// NoWritesPerformed, which mongod adds from the operation times of the
// client around the command's run, never applies to the errors this server
// makes: a fail point fails a command before that run, and the errors of a
// run here are never retriable.

// Labels mongod adds.
const (
	labelRetryableWrite       = "RetryableWriteError"
	labelTransientTransaction = "TransientTransactionError"
	labelNonResumable         = "NonResumableChangeStreamError"
)

// retriableCodes are the codes of mongod's RetriableError category.
var retriableCodes = map[int32]bool{
	6: true, 7: true, 89: true, 91: true, 134: true, 189: true, 262: true, 317: true, 358: true,
	384: true, 402: true, 406: true, 407: true, 412: true, 453: true, 462: true, 9001: true,
	10107: true, 11600: true, 11602: true, 13435: true, 13436: true, 50915: true, 91331: true,
	10045600: true,
}

// shutdownCodes are the codes of mongod's ShutdownError category and
// CallbackCanceled, which get RetryableWriteError while the server shuts
// down, even on a mongos.
var shutdownCodes = map[int32]bool{90: true, 91: true, 333: true, 11600: true}

// transientCodes are the codes mongod always deems transient in a
// transaction: WriteConflict, LockTimeout, PreparedTransactionInProgress,
// ShardCannotRefreshDueToLocksHeld, StaleDbVersion, the snapshot errors
// and the errors that need retargeting.
var transientCodes = map[int32]bool{
	112: true, 24: true, 267: true, 343: true, 249: true,
	239: true, 246: true, 250: true, 272: true, // SnapshotError
	150: true, 13388: true, // NeedRetargettingError
}

// nonResumableCodes are the codes of mongod's NonResumableChangeStreamError
// category.
var nonResumableCodes = map[int32]bool{280: true, 286: true}

// errorLabels returns the labels of the reply to req that failed with code
// (0 if the command succeeded) and/or has a writeConcernError with wcCode
// (0 if none).
func (s *Server) errorLabels(req *request, code, wcCode int32) []string {
	si := req.session
	commitOrAbort := req.name == "commitTransaction" || req.name == "abortTransaction"
	var labels []string
	switch {
	case code != 0 && si.inTransaction() && isTransient(code, wcCode != 0, commitOrAbort):
		labels = append(labels, labelTransientTransaction)
	case si.retryableWrite() || (si.inTransaction() && commitOrAbort):
		if shutdownCodes[code] && req.conn.closing() {
			labels = append(labels, labelRetryableWrite)
		} else if s.role != roleMongos && (retriableCodes[code] || retriableCodes[wcCode]) {
			labels = append(labels, labelRetryableWrite)
		}
	}
	if nonResumableCodes[code] {
		labels = append(labels, labelNonResumable)
	}
	return labels
}

// isTransient reports whether code fails a transaction in a way that
// allows to retry the whole of it, as mongod decides.
func isTransient(code int32, hasWriteConcernError, commitOrAbort bool) bool {
	if code == 358 { // InternalTransactionNotSupported
		return false
	}
	if transientCodes[code] {
		return true
	}
	if commitOrAbort {
		return code == 251 && !hasWriteConcernError // NoSuchTransaction
	}
	return retriableCodes[code] || code == 251
}

// closing reports whether the server's life that c belongs to is ending
// (Close, or ReplicaSet.Stop).
func (c *conn) closing() bool {
	select {
	case <-c.life.done:
		return true
	default:
		return false
	}
}
