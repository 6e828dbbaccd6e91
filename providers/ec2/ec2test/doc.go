// Package ec2test holds wire-level fakes of the AWS APIs the ec2 provider
// uses: httptest servers that speak EC2's Query protocol (form-encoded
// requests, XML answers in the EC2 namespace, EC2's error shape and HTTP
// statuses) and SSM's JSON 1.1 protocol, with the state those APIs keep
// (instances and their life cycle, security groups and rules, subnets,
// tags, client tokens, parameters). The real AWS SDK talks to them, so a
// test exercises the provider's requests and the SDK's parsing of real
// answer shapes, not a mock's idea of them.
//
// The fakes listen on 127.0.0.1 only. The private addresses they hand out
// (10.0.x.y) are data: nothing ever connects to them.
//
// # Fidelity
//
// Every operation the provider calls, with the parameters it uses, checked
// against the SDK's own documentation of the operation
// (github.com/aws/aws-sdk-go-v2/service/ec2 v1.349.0 and service/ssm
// v1.83.0, api_op_*.go) and the EC2 API reference
// (docs.aws.amazon.com/AWSEC2/latest/APIReference; "Ensuring idempotency
// in Amazon EC2 API requests", ec2/latest/devguide/ec2-api-idempotency;
// "Eventual consistency in the Amazon EC2 API"). "Same" means the fake
// does what the reference says; departures are in the notes.
//
//	Operation                    | Parameters the provider uses                           | Real semantics (reference)                                                   | Fake                                           | Notes
//	-----------------------------+--------------------------------------------------------+------------------------------------------------------------------------------+------------------------------------------------+------------------------------------------
//	RunInstances                 | ImageId, InstanceType, MinCount=MaxCount=1,            | ClientToken: up to 64 ASCII characters; a repeat with the same token and     | same (InvalidParameterValue for a bad token;   | One instance per call (the provider asks
//	                             | NetworkInterface.1 (DeviceIndex 0, SubnetId,           | parameters answers with the first call's instance (only its state may       | IdempotentParameterMismatch; the first         | for no more). Capacity, quota and spot
//	                             | SecurityGroupId, AssociatePublicIpAddress,             | differ), other parameters IdempotentParameterMismatch; "valid for at least  | instance, never a second). Tags: at most 50,   | refusals only when injected (Fault with
//	                             | DeleteOnTermination), UserData, BlockDeviceMapping,    | 24 hours after the termination of the instance" (api_op_RunInstances.go,    | keys 1-128 not "aws:", values <= 256.          | InstanceType/Subnet/Market). Tokens never
//	                             | MetadataOptions, IamInstanceProfile,                   | Run_Instance_Idempotency). Interface and instance-level subnet or groups    |                                                | expire (a test lasts less than 24 h).
//	                             | InstanceMarketOptions (spot), TagSpecification         | exclude each other (InvalidParameterCombination); groups must be in the     |                                                |
//	                             | (instance, volume), InstanceInitiatedShutdownBehavior, | subnet's VPC; user data base64, <= 16 KB; the AMI's architecture must be    |                                                |
//	                             | ClientToken                                            | the type's; tag limits per "Tag your Amazon EC2 resources".                  |                                                |
//	DescribeInstances            | Filter tag:<key>, instance-state-name, client-token;   | Filter values match exactly, with * and ? as wildcards; no MaxResults: all  | same; SetPageSize forces pages; a new instance | The provider always sends MaxResults 1000
//	                             | InstanceId; MaxResults, NextToken                      | items; MaxResults 5-1000 and not with InstanceId. Eventually consistent: a  | is left out of the next SetVisibilityDelay(n)  | and follows NextToken. Pending -> running
//	                             |                                                        | new instance may be missing, or InvalidInstanceID.NotFound by id, for a     | calls; a terminated one is listed for          | and shutting-down -> terminated advance
//	                             |                                                        | while; terminated instances stay listed about an hour.                       | SetTerminatedListing (default 1 h of the       | per answer (SetPendingDescribes,
//	                             |                                                        |                                                                              | fake's clock, SetClock), then forgotten.       | SetTerminateDescribes).
//	TerminateInstances           | InstanceId.N                                           | Idempotent by default (listed in ec2-api-idempotency): terminating a         | same; a hidden new instance is NotFound (and   | Found by this fake: the provider failed
//	                             |                                                        | terminated instance answers its state. Any id the API does not know (not    | the call counts toward its visibility); a      | StopCluster when it stopped an instance
//	                             |                                                        | yet, or no longer) fails the whole call with InvalidInstanceID.NotFound.    | forgotten one is NotFound.                     | launched a moment before; now retried.
//	GetConsoleOutput             | InstanceId                                             | The most recent 64 KB, base64; for instances the API still knows.           | same (Print appends what the member printed).  |
//	DescribeSpotInstanceRequests | SpotInstanceRequestId, NextToken                       | Unknown id: InvalidSpotInstanceRequestID.NotFound; MaxResults 5-1000.       | same; filters instance-id, state, status-code. |
//	DescribeSubnets              | SubnetId, NextToken                                    | Unknown id: InvalidSubnetID.NotFound; MaxResults 5-1000.                    | same; filters vpc-id, subnet-id,               |
//	                             |                                                        |                                                                              | availability-zone.                             |
//	DescribeImages               | ImageId                                                | Unknown id: InvalidAMIID.NotFound.                                           | same; Owners and filters are not implemented.  | The provider names images by id only.
//	DescribeInstanceTypes        | Filter current-generation, MaxResults 100, NextToken   | MaxResults 5-100; pages by NextToken.                                        | same.                                          |
//	CreateSecurityGroup          | GroupName, GroupDescription, VpcId,                    | Not idempotent: the name again in the VPC is InvalidGroup.Duplicate (so a   | same; every new group gets the allow-all       | A lost answer is repaired by the
//	                             | TagSpecification (security-group)                      | retry after a lost answer meets it). Name not "sg-*", ASCII description.    | egress rule, as EC2 gives it.                  | provider finding the group by name.
//	AuthorizeSecurityGroupIngress| GroupId, IpPermissions (IpProtocol, FromPort, ToPort,  | One rule that exists refuses the whole request (InvalidPermission.Duplicate);| same.                                          |
//	                             | IpRanges, Ipv6Ranges, UserIdGroupPairs.GroupId)        | a VPC group is named by id and must be in the same VPC (else                 |                                                |
//	                             |                                                        | InvalidGroup.NotFound).                                                       |                                                |
//	RevokeSecurityGroupIngress   | same as Authorize                                      | In a non-default VPC every rule named must exist, else                      | same.                                          |
//	                             |                                                        | InvalidPermission.NotFound and nothing removed.                              |                                                |
//	DescribeSecurityGroups       | Filter tag:<key>, group-name, vpc-id; GroupId;         | Exact values with wildcards; no MaxResults: all; MaxResults 5-1000.         | same.                                          |
//	                             | NextToken                                              |                                                                              |                                                |
//	DeleteSecurityGroup          | GroupId                                                | DependencyViolation while an interface holds the group (an instance not    | same; the detach time is SetDetachDelay (on    | Default delay 0, so that tests that do
//	                             |                                                        | terminated, and for a while after it is) or another group's rule names it  | the fake's clock; default 0); a rule naming    | not care stay fast; fault-mode tests set it.
//	                             |                                                        | (its own rules naming itself do not count); unknown: InvalidGroup.NotFound. | the group from another group blocks it.        |
//	SSM PutParameter             | Name, Value, Type SecureString, Tier, Description,     | Not idempotent: an existing name is ParameterAlreadyExists unless Overwrite;| same.                                          |
//	                             | Tags, KeyId, Overwrite                                 | Tags with Overwrite is a ValidationException; value limit per tier (4 KB    |                                                |
//	                             |                                                        | Standard, 8 KB Advanced); tag pattern [\p{L}\p{Z}\p{N}_.:/=+\-@].             |                                                |
//	SSM GetParameter             | Name, WithDecryption                                   | ParameterNotFound for a missing name.                                        | same.                                          |
//	SSM DeleteParameter          | Name                                                   | ParameterNotFound for a missing name (so a repeat after a lost answer meets | same.                                          |
//	                             |                                                        | it).                                                                          |                                                |
//	SSM DescribeParameters       | ParameterFilters Path (Recursive), tag:<key> (Equals); | See describeParameters: metadata only, Path by whole segments, tag values   | same (describeparams.go).                      |
//	                             | MaxResults 50, NextToken                               | exact, MaxResults 1-50.                                                      |                                                |
//
// Every request must be SigV4-signed for the fake's region and service
// and, for EC2, carry Version 2016-11-15; errors come in each protocol's
// shape with the status the service uses (RequestLimitExceeded and
// Unavailable 503, InternalError and capacity codes 500, ThrottlingException
// 400 on SSM).
//
// # Fault modes
//
//   - Fail, FailNext: the next n calls of an action answer an error code.
//   - Throttle(n) (EC2 and SSM): a throttling burst, the next n calls of any
//     action answer RequestLimitExceeded (503) or ThrottlingException (400).
//   - LoseAnswers(action, n, code): the call takes effect, then the answer
//     is lost: the connection is closed (code "") or the client gets code
//     (InternalError, 500). A client must repeat it and reach the same
//     outcome (RunInstances with the same ClientToken makes no second
//     instance).
//   - SetDetachDelay: DependencyViolation from DeleteSecurityGroup for that
//     long after the group's instances are terminated.
//   - SetVisibilityDelay, SetPendingDescribes, SetTerminateDescribes,
//     SetTerminatedListing: eventual consistency and the instance life cycle.
//   - Injected(code) counts the answers the faults made, so that a test can
//     tell that a fault was met.
package ec2test
