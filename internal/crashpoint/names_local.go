package crashpoint

// The local backend's points (package providers/local).
const (
	LocalSchedulerSpawned      Name = "local.scheduler.spawned"       // the scheduler's process runs; no state file names it yet
	LocalWorkerSpawned         Name = "local.worker.spawned"          // a worker's process runs; no state file names it yet
	LocalMemberRecorded        Name = "local.member.recorded"         // a member's state file is written
	LocalMemberSignalled       Name = "local.member.signalled"        // a member was sent SIGTERM, its stop time recorded; it may not have exited yet
	LocalWorkerStopped         Name = "local.worker.stopped"          // a worker exited on request; its state file remains
	LocalClusterWorkersStopped Name = "local.cluster.workers-stopped" // a stopping cluster's workers exited; its scheduler runs
	LocalClusterStopped        Name = "local.cluster.stopped"         // every member exited; state files and key remain
)
