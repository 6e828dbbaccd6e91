package crashpoint

// The Fargate backend's points (package providers/fargate), each right
// after one call to ECS, Secrets Manager or EC2 whose effect the backend
// finds again only by tag, name or client token.
const (
	FargateGroupCreated            Name = "fargate.group.created"             // the cluster's security group exists; no ingress rule yet
	FargateGroupAuthorized         Name = "fargate.group.authorized"          // the group admits the gateway and the cluster; not yet remembered
	FargateSecretCreated           Name = "fargate.secret.created"            // the TLS secret is stored; its ARN not yet remembered
	FargateTaskDefRegistered       Name = "fargate.taskdef.registered"        // a task definition is registered; no task runs it
	FargateSchedulerRun            Name = "fargate.scheduler.run"             // RunTask answered for the scheduler; the task not yet remembered
	FargateWorkerRun               Name = "fargate.worker.run"                // RunTask answered for a worker; the task not yet remembered
	FargateWorkerStopped           Name = "fargate.worker.stopped"            // StopTask answered for a surplus worker
	FargateClusterStopAsked        Name = "fargate.cluster.stop-asked"        // StopTask answered for every live task; not yet waited for
	FargateClusterTasksStopped     Name = "fargate.cluster.tasks-stopped"     // ECS reports every task STOPPED; group, secret, definitions still there
	FargateClusterGroupDeleted     Name = "fargate.cluster.group-deleted"     // the security group is deleted; the secret not yet
	FargateClusterSecretDeleted    Name = "fargate.cluster.secret-deleted"    // the TLS secret is deleted; the task definitions not yet
	FargateTaskDefsDeregistered    Name = "fargate.taskdefs.deregistered"     // the cluster's task definitions are INACTIVE; not yet deleted
	FargateTaskDefsDeleted         Name = "fargate.taskdefs.deleted"          // DeleteTaskDefinitions answered; the cluster not yet forgotten
	FargateLeftoverGroupDeleted    Name = "fargate.leftover.group-deleted"    // the reaper's DeleteSecurityGroup of a leftover answered
	FargateLeftoverSecretDeleted   Name = "fargate.leftover.secret-deleted"   // the reaper's DeleteSecret of a leftover answered
	FargateLeftoverFamiliesDeleted Name = "fargate.leftover.taskdefs-deleted" // the reaper deleted a leftover task definition family
)
