// Package fargatetest is a wire-level fake of the AWS services the fargate
// provider uses: ECS (JSON 1.1), Secrets Manager (JSON 1.1), the EC2
// Query/XML actions for security groups and subnets, and CloudWatch Logs'
// GetLogEvents (JSON 1.1). Each runs as an httptest server on 127.0.0.1
// that the real aws-sdk-go-v2 clients talk to through BaseEndpoint, so
// that the provider's requests are serialised, signed and parsed exactly
// as they would be against AWS.
//
// The fake keeps state (task definitions, tasks with their status
// transitions and private IPs, secrets, security groups), validates
// requests the way the services do where a provider could get it wrong,
// and lets a test inject failures (see Fault modes below).
//
// A task's private IP comes from its subnet's range (10.1.x.y in the
// default subnets: data only, nothing dials them; AddSubnet can give a
// loopback range whose addresses a test serves).
//
// # Fidelity
//
// Every operation the provider calls, with the parameters it uses, checked
// against the SDK's documentation of the operation
// (github.com/aws/aws-sdk-go-v2/service/ecs v1.106.0, secretsmanager
// v1.51.0, ec2 v1.349.0, cloudwatchlogs v1.92.2: api_op_*.go) and the
// services' API references (docs.aws.amazon.com/AmazonECS/latest/APIReference,
// including "Ensuring idempotency" and the eventual-consistency notes of
// RunTask; secretsmanager/latest/apireference; AWSEC2/latest/APIReference).
//
//	Operation                      | Parameters the provider uses                      | Real semantics (reference)                                                   | Fake                                             | Notes
//	-------------------------------+---------------------------------------------------+------------------------------------------------------------------------------+--------------------------------------------------+------------------------------------------
//	ecs:RegisterTaskDefinition     | family, containerDefinitions, cpu, memory,        | Each call makes a new revision (not idempotent); Fargate cpu/memory pairs;  | same.                                            | A repeat after a lost answer makes a
//	                               | networkMode awsvpc, requiresCompatibilities,       | at most 50 tags.                                                             |                                                  | second revision, as on ECS: harmless,
//	                               | execution/task role, tags                          |                                                                              |                                                  | both are deleted with the cluster.
//	ecs:DescribeTaskDefinition     | taskDefinition (family or family:revision)        | The latest ACTIVE revision for a family; ClientException when none.         | same.                                            |
//	ecs:ListTaskDefinitionFamilies | familyPrefix, status ALL, maxResults, nextToken   | familyPrefix matches the START of family names; status ACTIVE, INACTIVE or  | same; page size 100 (SetPageSize).               |
//	                               |                                                   | ALL (default); maxResults 1-100.                                             |                                                  |
//	ecs:ListTaskDefinitions        | familyPrefix, status, nextToken                   | familyPrefix is "the full family name" and matches EXACTLY; status         | same.                                            | Issue 19 B: the fake once matched a
//	                               |                                                   | defaults to ACTIVE; maxResults 1-100.                                       |                                                  | prefix, hiding a leak of revisions.
//	ecs:DeregisterTaskDefinition   | taskDefinition family:revision                    | Revision required; ACTIVE -> INACTIVE; again is fine.                        | same.                                            |
//	ecs:DeleteTaskDefinitions      | taskDefinitions (1-10)                            | INACTIVE -> DELETE_IN_PROGRESS; ACTIVE ones fail in failures[].             | same.                                            |
//	ecs:RunTask                    | cluster, taskDefinition, capacityProviderStrategy | clientToken: up to 64 characters in 33-126; the same token answers with the | same (a repeat never starts a second task);      | Tokens never expire here. Capacity
//	                               | or launchType, networkConfiguration.awsvpc,       | task it started. launchType and strategy exclude each other; subnets of one | overrides <= 8192 characters; a capacity         | failures come in failures[] when
//	                               | overrides, startedBy, group, tags,                 | VPC, groups of that VPC; overrides at most 8192 characters; startedBy <= 36 | provider must be associated with the cluster.    | injected (FailRunTask).
//	                               | enableECSManagedTags, propagateTags, clientToken  | of [A-Za-z0-9_/-]. Eventually consistent: a new task may be unknown for a   |                                                  |
//	                               |                                                   | moment to ListTasks, DescribeTasks and StopTask.                             |                                                  |
//	ecs:ListTasks                  | cluster, startedBy, desiredStatus, nextToken      | startedBy exact, the only filter besides desiredStatus (default RUNNING);   | same; SetListLag(n) leaves new tasks out of the  |
//	                               |                                                   | maxResults 1-100; stopped tasks listed for at least an hour.                 | next n listings; STOPPED ones for                |
//	                               |                                                   |                                                                              | SetStoppedListing (default 1 h).                 |
//	ecs:DescribeTasks              | cluster, tasks (<= 100), include TAGS             | Unknown ARNs come back in failures[] as MISSING; a task stopped more than   | same; SetDescribeLag(n): a new task is MISSING   | Found by this fake: the provider forgot
//	                               |                                                   | about an hour ago is forgotten (MISSING); a new one may be MISSING for a    | to the next n calls naming it; STOPPED ones are  | a task it had just started when ECS
//	                               |                                                   | moment.                                                                      | MISSING after SetStoppedListing.                 | answered MISSING; now kept for a grace.
//	ecs:StopTask                   | cluster, task, reason (<= 255)                    | Idempotent in effect; an unknown task is InvalidParameterException "The     | same, with the describe lag.                     |
//	                               |                                                   | referenced task was not found."                                              |                                                  |
//	secretsmanager:CreateSecret    | Name, ClientRequestToken, SecretString,           | ClientRequestToken 32-64 characters; a repeat with the same token and value | same.                                            | A lost answer's retry is answered as the
//	                               | Description, Tags                                 | is ignored and answers as the first did; another request for the name is    |                                                  | first call (the provider's token is
//	                               |                                                   | ResourceExistsException; a name scheduled for deletion InvalidRequest.      |                                                  | derived from the cluster).
//	secretsmanager:DescribeSecret  | SecretId                                          | ResourceNotFoundException when missing; DeletedDate when scheduled.         | same.                                            |
//	secretsmanager:DeleteSecret    | SecretId, ForceDeleteWithoutRecovery              | Force deletes at once (not with RecoveryWindowInDays); missing:             | same; the name is free at once.                  | AWS frees the name asynchronously: a
//	                               |                                                   | ResourceNotFoundException.                                                   |                                                  | re-create seconds later can be refused.
//	secretsmanager:ListSecrets     | Filters (tag-key, tag-value, name), MaxResults    | See listSecrets: prefix matches, "!" negation, MaxResults 1-100.            | same (listsecrets.go).                           |
//	ec2:DescribeSubnets            | SubnetId                                          | InvalidSubnetID.NotFound for an unknown id.                                 | same.                                            |
//	ec2:CreateSecurityGroup        | GroupName, GroupDescription, VpcId, tags          | InvalidGroup.Duplicate for a name again in the VPC.                          | same.                                            |
//	ec2:Authorize/RevokeSecurity-  | GroupId, IpPermissions (UserIdGroupPairs, ranges) | As in package ec2test: Duplicate refuses the whole request; Revoke of a     | same.                                            |
//	GroupIngress                   |                                                   | missing rule is InvalidPermission.NotFound.                                  |                                                  |
//	ec2:DescribeSecurityGroups     | Filter tag:<key>, group-name, vpc-id; GroupId     | Exact values; all items without MaxResults.                                  | same.                                            |
//	ec2:DeleteSecurityGroup        | GroupId                                           | DependencyViolation while a task's interface holds the group (until some   | same; SetDetachDelay (fake clock, SetClock;      |
//	                               |                                                   | time after the task is STOPPED) or another group's rule names it.           | default 0).                                      |
//	logs:GetLogEvents              | logGroupName, logStreamName, startFromHead, limit | limit 1-10000 (default 10000, and at most 1 MB per answer); the last events | same, without the 1 MB cap.                      | The provider reads a few dozen lines.
//	                               |                                                   | unless startFromHead.                                                        |                                                  |
//
// Requests must be SigV4-signed for the right service; errors come in each
// protocol's shape (JSON __type, or EC2's XML) with the service's status.
//
// # Fault modes
//
//   - FailNext(action, n, status, code, message): the next n calls of an
//     action answer that error; Throttle(action, n) with the service's
//     throttling answer (400 ThrottlingException; EC2 503
//     RequestLimitExceeded); ThrottleAll(n): a burst across every service
//     and action.
//   - LoseAnswers(action, n): the call takes effect, then the connection is
//     closed without an answer; LoseAnswersWith(action, n, status, code):
//     the client gets that error instead (500 InternalFailure, say).
//   - FailRunTask: RunTask capacity failures in failures[].
//   - SetDetachDelay: DependencyViolation for that long after a task stops.
//   - SetListLag, SetDescribeLag, SetStoppedListing, SetAutoAdvance,
//     Advance: eventual consistency and the task life cycle.
//   - Injected(code) counts the answers the faults made.
package fargatetest
