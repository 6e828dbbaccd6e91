package crashpoint

// Name names one point. Names read "<layer>.<operation>.<what is done>":
// a crash there happens right after that.
type Name string

// The scheduling core's points (package scheduler), each at a boundary
// between a durable write and a call outside the store, or the reverse.
const (
	CoreCreateAdmitted          Name = "core.create.admitted"           // cluster row and quota admission committed; not yet queued or answered
	CoreStartRecorded           Name = "core.start.recorded"            // STARTING and the scheduler's ledger row committed; nothing launched
	CoreStartLaunched           Name = "core.start.launched"            // the backend accepted the scheduler; not yet described
	CoreStartRoutePublished     Name = "core.start.route-published"     // the route is in the proxy; RUNNING not yet recorded
	CoreStartRunningRecorded    Name = "core.start.running-recorded"    // RUNNING committed; workers not yet considered
	CoreScaleRecorded           Name = "core.scale.recorded"            // the new worker count committed; nothing started or stopped
	CoreWorkersNamed            Name = "core.workers.named"             // worker names and ledger rows committed; none launched
	CoreWorkerLaunched          Name = "core.workers.launched"          // the backend accepted one worker; the next not yet asked for
	CoreWorkerStopRecorded      Name = "core.workers.stop-recorded"     // a surplus worker's ledger row closed; the backend not yet asked
	CoreWorkerStopped           Name = "core.workers.stopped"           // the backend stopped a surplus worker
	CoreWorkersReadyRecorded    Name = "core.workers.ready-recorded"    // the scheduler's worker count committed
	CoreLedgerSynced            Name = "core.ledger.synced"             // ledger rows of members the backend reports gone closed
	CoreStopRecorded            Name = "core.stop.recorded"             // STOPPING committed (a user's stop, idle or lifetime)
	CoreStoppingRouteDeleted    Name = "core.stopping.route-deleted"    // the route is gone from the proxy; the backend not yet asked
	CoreStoppingProviderDone    Name = "core.stopping.provider-stopped" // the backend stopped every member; STOPPED not yet recorded
	CoreStoppingStoppedRecorded Name = "core.stopping.stopped-recorded" // STOPPED and the ledger's last rows committed
	CoreFailRecorded            Name = "core.fail.recorded"             // FAILED committed; the backend not yet asked to stop
	CoreLeaseAcquired           Name = "core.lease.acquired"            // this replica holds a cluster's lease; no work done yet
	CoreLeasesRenewed           Name = "core.lease.renewed"             // the batched renewal committed
	CoreReaperOrphanStopped     Name = "core.reaper.orphan-stopped"     // the reaper stopped members no stored cluster owns
	CoreReaperLeftoverDeleted   Name = "core.reaper.leftover-deleted"   // the reaper deleted one leftover resource found by tag
)

var coreNames = []Name{
	CoreCreateAdmitted, CoreStartRecorded, CoreStartLaunched, CoreStartRoutePublished, CoreStartRunningRecorded,
	CoreScaleRecorded, CoreWorkersNamed, CoreWorkerLaunched, CoreWorkerStopRecorded, CoreWorkerStopped,
	CoreWorkersReadyRecorded, CoreLedgerSynced, CoreStopRecorded, CoreStoppingRouteDeleted, CoreStoppingProviderDone,
	CoreStoppingStoppedRecorded, CoreFailRecorded, CoreLeaseAcquired, CoreLeasesRenewed, CoreReaperOrphanStopped,
	CoreReaperLeftoverDeleted,
}

// Core lists the core's points, in the order a cluster's life meets them.
// The backends list theirs in their registrations; the composition root
// puts the lists together (`gateway debug crash-points`).
func Core() []Name {
	return append([]Name(nil), coreNames...)
}
