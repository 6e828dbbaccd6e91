package local

import "github.com/gatewayhq/gateway/internal/crashpoint"

// The local backend's crash points (listed by its Registration), each right
// after a process is started or stopped, or a state file written, where a
// restarted gateway must find the member again from its state files and
// the processes that run.
const (
	pointSchedulerSpawned      crashpoint.Name = "local.scheduler.spawned"       // the scheduler's process runs; no state file names it yet
	pointWorkerSpawned         crashpoint.Name = "local.worker.spawned"          // a worker's process runs; no state file names it yet
	pointMemberRecorded        crashpoint.Name = "local.member.recorded"         // a member's state file is written
	pointMemberSignalled       crashpoint.Name = "local.member.signalled"        // a member was sent SIGTERM, its stop time recorded; it may not have exited yet
	pointWorkerStopped         crashpoint.Name = "local.worker.stopped"          // a worker exited on request; its state file remains
	pointClusterWorkersStopped crashpoint.Name = "local.cluster.workers-stopped" // a stopping cluster's workers exited; its scheduler runs
	pointClusterStopped        crashpoint.Name = "local.cluster.stopped"         // every member exited; state files and key remain
)
