// Package jobqueue is a generic keyed job queue and its worker pool, with no knowledge of what
// the jobs do: the service that owns the jobs supplies their rules as a Policy.
//
// A Queue is bounded (a full queue refuses, never blocks) and coalesces jobs by key (Policy.Key:
// a job whose key waits is merged into it, Policy.Merge); a key never runs twice at once. Each
// job has a Class:
//
//   - ClassPlain jobs run alone.
//   - ClassBatched jobs are handed out together with the other batched jobs of their group
//     (Policy.Group, at most MaxBatch; Queue.NextBatch), may wait Config.BatchDelay after their
//     first push so that more of their group join, and do not start on a target (Policy.Target)
//     that a running claimer has claimed.
//   - ClassClaimer jobs claim the targets they are about to write through the Lease the Pool
//     passes to Executor.Execute (Queue.Claim): the claim waits until no batched job of those
//     targets runs, and no batched job of them starts until the claimer is Done. A waiting
//     claimer for which Policy.Absorbs holds absorbs the waiting batched jobs (Policy.Absorb):
//     it covers their work.
//
// Queue.RetryAt holds a job until a known time, outside the capacity, and pushes it then. Queue.Done
// ends a job's run and its claim.
//
// A Pool runs a Queue's jobs on a fixed number of workers, each job on a fresh context with a
// timeout; a panic fails that job only; a batch runs as one when the Executor is a Batcher, and a
// Stager's batch takes in the jobs of its group that arrive while it prepares. At shutdown,
// in-flight jobs get a grace period and waiting jobs are handed back (logged).
//
// Claims and leases are explicit parameters (Lease), never values in a context. The package
// imports no fleetbot package.
package jobqueue
