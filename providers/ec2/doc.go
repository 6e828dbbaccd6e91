// Package ec2 runs Dask schedulers and workers on Amazon EC2, one instance
// per member, with the AWS SDK for Go v2.
//
// # What it makes
//
// For each cluster:
//
//   - a security group in the subnets' VPC, named gateway-<gateway-id>-<cluster>,
//     that lets the gateway's security group (GatewaySecurityGroup, a
//     source-group rule) reach the scheduler's TLS port 8786 and dashboard
//     8787, and lets the cluster's own members reach each other on every
//     TCP port (a rule referencing the group itself). No address range is
//     admitted, so members of different clusters sharing subnets cannot
//     reach each other; GatewayCIDRs is a fallback that admits ranges
//     instead (and with them whatever else is there). Outbound traffic keeps
//     EC2's default (allowed), which members need to pull their image and
//     reach SSM;
//   - an SSM SecureString parameter /gateway/<gateway-id>/<cluster>/tls
//     holding the cluster's certificate and key, which members read at boot
//     (user data is not secret: it never holds the key);
//   - one instance per member (IMDSv2 only, hop limit 2; an encrypted gp3
//     root volume deleted with it; shutdown behaviour "terminate"), tagged
//     gateway-id, gateway-cluster, gateway-member, gateway-owner and Name,
//     plus ExtraTags, on the instance and its volume.
//
// A member's user data installs nothing secret and starts the cluster's
// container image with host networking in a systemd unit: "dask scheduler"
// with TLS on 8786 and the dashboard over HTTPS with the cluster's
// certificate on 8787 under the cluster's dashboard prefix (DashboardURL
// is https://<private ip>:8787), or "dask worker tls://<scheduler>". When Dask exits, or the
// set-up fails, the instance powers off and so terminates: nothing runs on
// idle, and Describe reports the member stopped with the reason.
//
// Every resource is found again by its tags, so the provider keeps no state
// that a restart could lose: RunInstances carries a client token derived
// from the gateway id, cluster, member and attempt, so a launch repeated
// after a timeout or crash returns the instance already launched.
//
// # Capacity
//
// A member is launched with the spec's instance type, then each of its
// Alternatives, in every configured subnet (the scheduler's first, for
// workers: traffic between zones is slower and charged). Workers of a Spot
// cluster try spot capacity first and fall back to on-demand. Throttling
// and server errors are retried with exponential backoff and full jitter;
// want of capacity moves on to the next subnet or type; an exhausted vCPU
// quota stops at once with the quota's name. When nothing could be had the
// error wraps providers.ErrCapacity and lists every attempt.
//
// # IAM
//
// The gateway's identity needs:
//
//	ec2:RunInstances, ec2:CreateTags (on create, for RunInstances and
//	CreateSecurityGroup), ec2:TerminateInstances, ec2:DescribeInstances,
//	ec2:DescribeSubnets, ec2:DescribeImages, ec2:DescribeInstanceTypes,
//	ec2:DescribeSpotInstanceRequests, ec2:CreateSecurityGroup,
//	ec2:AuthorizeSecurityGroupIngress, ec2:RevokeSecurityGroupIngress,
//	ec2:DescribeSecurityGroups,
//	ec2:DeleteSecurityGroup, iam:PassRole (the instance profile's role),
//	ssm:PutParameter, ssm:DeleteParameter, ssm:AddTagsToResource on
//	arn:aws:ssm:<region>:<account>:parameter/gateway/<gateway-id>/*,
//	ssm:GetParameter on the AMI parameters (public ones under
//	/aws/service/), ssm:DescribeParameters (on "*": the reaper lists the
//	TLS parameters by path and tag, never their values), and kms:Encrypt with the parameters' key when it is not
//	the account's aws/ssm key. Terminating and deleting can be limited to
//	resources tagged gateway-id=<gateway-id>.
//
// The members' instance profile can read every cluster's parameter (one
// role for all members), so a member cuts itself off from the instance
// metadata service once it has its key and its image, before any code of
// the image runs (pulling runs none): users' code, which runs with the
// host's network and without the capability to undo it, never gets the
// role's credentials.
//
// The members' instance profile needs ssm:GetParameter on
// arn:aws:ssm:<region>:<account>:parameter/gateway/<gateway-id>/* and
// kms:Decrypt on the parameters' key, plus read access to the image's
// registry (for ECR: the AmazonEC2ContainerRegistryReadOnly policy).
package ec2
