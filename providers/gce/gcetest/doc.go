// Package gcetest is a wire-level fake of the parts of the Compute Engine v1
// and Secret Manager v1 REST APIs that the gce provider uses: an
// httptest.Server on 127.0.0.1 that speaks their JSON, holds state
// (instances with status transitions, firewall rules, secrets, zone and
// global operations), evaluates list filters on labels, pages lists, and
// injects the failures a real project produces (stock-outs and quota errors
// in operations, rate limits, HTTP 429 and 503, lost answers, operations
// that never finish, preemptions).
//
// It is a fake rather than a mock: the provider under test talks to it
// through the real cloud.google.com/go/compute REST clients, and it checks
// requests the way the API does (names, machine types that exist in the
// zone, GPUs that require onHostMaintenance TERMINATE, the documented GPU
// shapes, Spot-only types and boot disk types per series, duplicate names,
// request IDs, CRC32C of secret payloads), so a request the real API would
// refuse fails here too.
//
// Time is modelled by requests: every request first advances the world one
// step (operations created by earlier requests finish, instances move from
// STAGING to RUNNING), so a client that waits on an operation sees it
// RUNNING, then DONE, without sleeping.
//
// # Fidelity
//
// Every method the provider calls, with the parameters it uses, checked
// against the generated clients' documentation
// (google.golang.org/api/compute/v1 and cloud.google.com/go/compute
// apiv1/computepb: InsertInstanceRequest.RequestId, ListInstancesRequest
// Filter/MaxResults/PageToken) and the REST references
// (cloud.google.com/compute/docs/reference/rest/v1,
// cloud.google.com/secret-manager/docs/reference/rest).
//
//	Method                          | Parameters the provider uses                  | Real semantics (reference)                                                    | Fake                                           | Notes
//	--------------------------------+-----------------------------------------------+-------------------------------------------------------------------------------+------------------------------------------------+------------------------------------------
//	instances.insert                | zone, resource (name, machineType, disks,     | requestId: a UUID, not the zero UUID; a repeat within 60 minutes "will      | same (400 invalid for a bad request ID; the    | Request IDs never expire here. A stock-out
//	                                | networkInterfaces, scheduling, GPUs, labels,  | ignore the second request" and answer the first operation. Names RFC 1035, | first operation again). A name that exists is  | or quota error comes in the operation
//	                                | metadata, serviceAccounts, tags), requestId   | labels [a-z0-9_-]; GPUs need onHostMaintenance TERMINATE; a taken name is   | 409 alreadyExists.                             | (FailInserts), not in the HTTP answer.
//	                                |                                               | 409 alreadyExists.                                                             |                                                |
//	instances.insert: GPUs on N1    | guestAccelerators (type, count), machineType  | N1 takes nvidia-tesla-t4/-p4 in 1, 2 or 4, -v100 in 1, 2, 4 or 8, -p100 in  | same, from gcerules.N1GPUs (400 naming the     | P100 x4's zone-dependent ceiling kept at
//	                                |                                               | 1, 2 or 4, each count with a vCPU and memory ceiling; no other series takes | rule and its page); one accelerator type per   | its lower value (64 vCPUs, 208 GB), true
//	                                |                                               | attached GPUs; f1-micro/g1-small none (cloud.google.com/compute/docs/gpus)  | instance.                                      | in every zone.
//	instances.insert: built-in GPUs | machineType a2/a3/a4/a4x/g2/g4, guestAccel.   | The type fixes model and count; nothing is attached to it                   | guestAccelerators on such a type: 400.         | The provider refuses a different count
//	                                |                                               | (cloud.google.com/compute/docs/accelerator-optimized-machines).             |                                                | before asking (gcerules.CheckBuiltInGPUs).
//	instances.insert: Spot-only     | machineType, scheduling.provisioningModel     | a3-highgpu-1g/-2g/-4g are Spot or flex-start only (same page).              | on demand: 400.                                | Not listed or priced on demand.
//	instances.insert: boot disk     | disks[].initializeParams.diskType             | "must be compatible with the instance's machine series" (discovery doc,    | C4, C4A, C4D, N4, N4A, N4D, H4D, M4, X4, A3    | The provider picks per series
//	                                |                                               | AttachedDiskInitializeParams.diskType); Hyperdisk-only and PD-only series:  | Ultra, A4, A4X, G4 refuse pd-*; N1, E2, A2     | (gcerules.BootDiskType). No diskType: the
//	                                |                                               | compute/docs/disks/persistent-disks#supported_machine_series and           | refuse hyperdisk-*: 400.                       | series' default, accepted.
//	                                |                                               | compute/docs/disks/hyperdisks#machine-type-support.                         |                                                |
//	instances.aggregatedList:       | (any listing)                                 | unreachables: "Unreachable resources"; a scope's warning.code UNREACHABLE:  | Unreachable(zone, warning): the zone's         | The zone's own methods answer 503
//	partial answers                 |                                               | "A given scope cannot be reached" (Compute v1 discovery document).          | instances are left out and the zone named in   | meanwhile.
//	                                |                                               |                                                                               | unreachables or warned UNREACHABLE.            |
//	instances.delete                | zone, instance                                | Returns an operation; the instance is gone when it is DONE; a missing one  | same; requestId honoured as for insert.        | The provider sends no requestId: a
//	                                |                                               | is 404 notFound.                                                              |                                                | repeat meets 404, taken as done.
//	instances.aggregatedList        | filter (labels.k = "v" AND ...), pageToken    | "=" compares whole values (labels exact); maxResults 0-500, default 500;   | same; "=", "!=" and ":" (substring); anything  | HideFromLists(name) models a listing
//	                                |                                               | nextPageToken until the last page.                                            | else is refused rather than matching all.      | that lags.
//	instances.getGuestAttributes    | zone, instance, queryPath                     | 404 notFound for a path with no attributes.                                   | same.                                          |
//	zoneOperations.wait / get / list| operation; filter (targetId = "n")            | wait returns DONE or, after about 2 minutes, the operation as it is.       | same (briefly, or HangOperations for ever).    |
//	globalOperations.wait / get     | operation                                     | as zoneOperations.                                                            | same.                                          |
//	firewalls.insert / update /     | resource (sourceRanges, sourceTags,           | Accounts cannot be mixed with tags; an ingress rule needs a source; update | same; requestId honoured.                      | Compute Engine has no DependencyViolation:
//	get / delete / list             | source/targetServiceAccounts, targetTags,     | (PUT) replaces the whole rule; delete of a missing rule is 404; list takes | (list: lists.go, with eq/ne RE2 filters).      | a rule can be deleted while instances
//	                                | allowed), filter                              | "name eq RE2" matching the whole field.                                      |                                                | it targets still run.
//	machineTypes.list,              | zone                                          | Per zone; paged as above.                                                     | same.                                          |
//	acceleratorTypes.list           |                                               |                                                                               |                                                |
//	secrets.create                  | secretId, replication, labels                 | 409 ALREADY_EXISTS for a taken id (so a retry after a lost answer meets    | same.                                          |
//	                                |                                               | it); labels as Compute's.                                                     |                                                |
//	secrets.addVersion              | payload.data, payload.dataCrc32c              | Not idempotent: each call a new version; CRC32C (Castagnoli) checked.       | same.                                          |
//	secrets.get / delete /          | name; policy                                  | 404 NOT_FOUND when missing.                                                   | same.                                          |
//	setIamPolicy / versions.access  |                                               |                                                                               |                                                |
//	secrets.list                    | filter labels.k=v, pageSize, pageToken        | See listSecrets (lists.go).                                                   | same.                                          |
//
// # Fault modes
//
//   - FailInserts, FailInsertsOf: the insert's operation ends in an error
//     (ZONE_RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED, ...).
//   - FailRequests(method, path, n, status): HTTP errors (429, 503, 403...).
//   - Throttle(n): a burst of rate limiting on any request, as the APIs
//     answer it: Compute 403 rateLimitExceeded, Secret Manager 429
//     RESOURCE_EXHAUSTED.
//   - LoseAnswers(method, path, n): the request takes effect, the client gets
//     503; LoseAnswersReset: the connection is closed without an answer.
//   - HangOperations, HoldStaging, AutoReady, Preempt, PowerOff, Remove,
//     HideFromLists: the life cycle and eventual consistency.
//   - Unreachable, Reachable: a zone that aggregatedList cannot reach.
//   - Injected counts the answers the request faults made.
package gcetest
