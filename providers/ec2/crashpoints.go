package ec2

import "github.com/gatewayhq/gateway/internal/crashpoint"

// The EC2 backend's crash points (listed by its Registration), each right
// after one call to EC2 or SSM whose effect the backend finds again only
// by tag or name, or before the next call that depends on it.
const (
	pointGroupCreated             crashpoint.Name = "ec2.group.created"              // the cluster's security group exists; no ingress rule yet
	pointGroupAuthorized          crashpoint.Name = "ec2.group.authorized"           // the group admits the gateway and the cluster; not yet remembered
	pointParameterPut             crashpoint.Name = "ec2.parameter.put"              // the TLS parameter is stored; no instance launched
	pointSchedulerLaunched        crashpoint.Name = "ec2.scheduler.launched"         // RunInstances answered for the scheduler; the instance not yet remembered
	pointWorkerLaunched           crashpoint.Name = "ec2.worker.launched"            // RunInstances answered for a worker; the instance not yet remembered
	pointWorkerTerminated         crashpoint.Name = "ec2.worker.terminated"          // a surplus worker's instance was terminated; its launch record not yet dropped
	pointClusterTerminated        crashpoint.Name = "ec2.cluster.terminate-asked"    // TerminateInstances answered for every live instance; not yet waited for
	pointClusterInstancesGone     crashpoint.Name = "ec2.cluster.instances-ended"    // EC2 lists every instance terminated; group and parameter still there
	pointClusterGroupDeleted      crashpoint.Name = "ec2.cluster.group-deleted"      // the security group is deleted; the TLS parameter not yet
	pointClusterParameterDeleted  crashpoint.Name = "ec2.cluster.parameter-deleted"  // the TLS parameter is deleted; the cluster not yet forgotten
	pointLeftoverGroupDeleted     crashpoint.Name = "ec2.leftover.group-deleted"     // the reaper's DeleteSecurityGroup of a leftover answered
	pointLeftoverParameterDeleted crashpoint.Name = "ec2.leftover.parameter-deleted" // the reaper's DeleteParameter of a leftover answered
)
