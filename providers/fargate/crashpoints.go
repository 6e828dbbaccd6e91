package fargate

import "github.com/gatewayhq/gateway/internal/crashpoint"

// The Fargate backend's crash points (listed by its Registration), each
// right after one call to ECS, Secrets Manager or EC2 whose effect the
// backend finds again only by tag, name or client token.
const (
	pointGroupCreated            crashpoint.Name = "fargate.group.created"             // the cluster's security group exists; no ingress rule yet
	pointGroupAuthorized         crashpoint.Name = "fargate.group.authorized"          // the group admits the gateway and the cluster; not yet remembered
	pointSecretCreated           crashpoint.Name = "fargate.secret.created"            // the TLS secret is stored; its ARN not yet remembered
	pointTaskDefRegistered       crashpoint.Name = "fargate.taskdef.registered"        // a task definition is registered; no task runs it
	pointSchedulerRun            crashpoint.Name = "fargate.scheduler.run"             // RunTask answered for the scheduler; the task not yet remembered
	pointWorkerRun               crashpoint.Name = "fargate.worker.run"                // RunTask answered for a worker; the task not yet remembered
	pointWorkerStopped           crashpoint.Name = "fargate.worker.stopped"            // StopTask answered for a surplus worker
	pointClusterStopAsked        crashpoint.Name = "fargate.cluster.stop-asked"        // StopTask answered for every live task; not yet waited for
	pointClusterTasksStopped     crashpoint.Name = "fargate.cluster.tasks-stopped"     // ECS reports every task STOPPED; group, secret, definitions still there
	pointClusterGroupDeleted     crashpoint.Name = "fargate.cluster.group-deleted"     // the security group is deleted; the secret not yet
	pointClusterSecretDeleted    crashpoint.Name = "fargate.cluster.secret-deleted"    // the TLS secret is deleted; the task definitions not yet
	pointTaskDefsDeregistered    crashpoint.Name = "fargate.taskdefs.deregistered"     // the cluster's task definitions are INACTIVE; not yet deleted
	pointTaskDefsDeleted         crashpoint.Name = "fargate.taskdefs.deleted"          // DeleteTaskDefinitions answered; the cluster not yet forgotten
	pointLeftoverGroupDeleted    crashpoint.Name = "fargate.leftover.group-deleted"    // the reaper's DeleteSecurityGroup of a leftover answered
	pointLeftoverSecretDeleted   crashpoint.Name = "fargate.leftover.secret-deleted"   // the reaper's DeleteSecret of a leftover answered
	pointLeftoverFamiliesDeleted crashpoint.Name = "fargate.leftover.taskdefs-deleted" // the reaper deleted a leftover task definition family
)
