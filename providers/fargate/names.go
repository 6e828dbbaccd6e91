package fargate

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

// Tags on every task, security group, secret and task definition: how
// List, Describe and the reaper find what belongs to this gateway and to
// which cluster, member and owner.
const (
	tagGateway = "gateway-id"
	tagCluster = "gateway-cluster"
	tagMember  = "gateway-member"
	tagOwner   = "gateway-owner"
	// clusterMember is the gateway-member tag of what the cluster's
	// members share (security group, secret, task definitions): no member
	// is named so.
	clusterMember = "cluster"
)

const schedulerMember = "scheduler"

// shortHash is the first n hex digits of the SHA-256 of s.
func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}

// hashOf hashes parts that may themselves contain any character: the
// separator cannot occur in them.
func hashOf(n int, parts ...string) string {
	return shortHash(strings.Join(parts, "\x00"), n)
}

// validName reports whether a cluster or member name can be used as is in
// the names and tags AWS restricts. The core's names (hex cluster names,
// "scheduler", "worker-N") always are; anything else is refused at start,
// and is simply unknown to Describe and the stops.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || (i > 0 && (r == '-' || r == '_'))
		if !ok {
			return false
		}
	}
	return true
}

// startedBy is what ECS's ListTasks narrows to one cluster by: at most 36
// characters, so long cluster names are hashed.
func startedBy(cluster string) string {
	if s := "gateway-" + cluster; len(s) <= 36 {
		return s
	}
	return "gateway-" + shortHash(cluster, 28)
}

// groupName is the cluster's security group name, unique per gateway and
// cluster within the VPC.
func (p *Provider) groupName(cluster string) string {
	return "gateway-" + p.gwKey + "-" + cluster
}

// secretName is the cluster's Secrets Manager secret. The execution role's
// policy can grant GetSecretValue on "gateway/*".
func (p *Provider) secretName(cluster string) string {
	return "gateway/" + p.gwKey + "/" + cluster + "/tls"
}

// familyPrefix starts the names of the cluster's task definitions; a
// 12-digit shape hash follows it.
func (p *Provider) familyPrefix(cluster string) string {
	return "gateway-" + p.gwKey + "-" + cluster + "-"
}

// ownFamily reports whether family is one of the cluster's: the prefix
// followed by exactly a shape hash (another cluster whose name merely
// starts with this one's plus "-" has more after the prefix).
func (p *Provider) ownFamily(family, cluster string) bool {
	rest, ok := strings.CutPrefix(family, p.familyPrefix(cluster))
	if !ok || len(rest) != 12 {
		return false
	}
	for _, r := range rest {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// tagValue makes s acceptable as a tag value on ECS, Secrets Manager and
// EC2 alike: letters, digits, spaces and + - = . _ : / @, at most 256.
func tagValue(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == ' ' || strings.ContainsRune("+-=._:/@", r) {
			b.WriteRune(r)
		} else {
			b.WriteRune('_')
		}
	}
	out := b.String()
	if len(out) > 256 {
		out = out[:256]
	}
	return out
}

// idTag is this gateway's ownership tag value.
func (p *Provider) idTag() string { return tagValue(p.cfg.GatewayID) }

func taskTags(t ecstypes.Task) map[string]string {
	m := make(map[string]string, len(t.Tags))
	for _, tg := range t.Tags {
		m[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	return m
}

// secretToken is the Secrets Manager idempotency token of the cluster's
// secret (32 to 64 characters; UUID-shaped as AWS recommends).
func (p *Provider) secretToken(cluster string) string {
	h := hashOf(32, "secret", p.cfg.GatewayID, cluster)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// runToken is the RunTask client token of one launch attempt: the same
// attempt after a crash or a lost answer gets the task it already started.
// after is the task a previous token turned out to have started and
// stopped since (a member started again under the same name).
func (p *Provider) runToken(cluster, member, attempt, after string) string {
	return hashOf(40, "run", p.cfg.GatewayID, cluster, member, attempt, after)
}
