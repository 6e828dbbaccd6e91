package gce

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// maxName is the longest GCE resource name (RFC 1035 label).
const maxName = 63

// gceName joins parts into a valid GCE resource name
// ([a-z]([-a-z0-9]*[a-z0-9])?, at most 63 characters), deterministically:
// "gw-" + parts joined by "-". When a part has characters a name cannot
// hold, or the result is too long, it is cut and given a hash of the exact
// parts, so that distinct inputs keep distinct names.
func gceName(parts ...string) string {
	var b strings.Builder
	b.WriteString("gw")
	lossy := false
	for _, part := range parts {
		b.WriteByte('-')
		for _, r := range part {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
				b.WriteRune(r)
			case r >= 'A' && r <= 'Z':
				b.WriteRune(r - 'A' + 'a')
				lossy = true
			default:
				b.WriteByte('-')
				lossy = true
			}
		}
	}
	name := b.String()
	if !lossy && len(name) <= maxName && !strings.HasSuffix(name, "-") {
		return name
	}
	suffix := "-" + shortHash(strings.Join(parts, "\x00"))
	keep := min(len(name), maxName-len(suffix))
	return strings.TrimRight(name[:keep], "-") + suffix
}

// labelValue turns s into a valid label value ([a-z0-9_-], at most 63
// characters), deterministically, with a hash of s when that loses
// anything (upper case, other characters, length).
func labelValue(s string) string {
	var b strings.Builder
	lossy := false
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r >= 'A' && r <= 'Z':
			b.WriteRune(r - 'A' + 'a')
			lossy = true
		default:
			b.WriteByte('_')
			lossy = true
		}
	}
	v := b.String()
	if !lossy && len(v) <= maxName {
		return v
	}
	suffix := "-" + shortHash(s)
	return v[:min(len(v), maxName-len(suffix))] + suffix
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:4])
}

// instanceName is the member's instance: gw-<cluster>-<member>.
func instanceName(cluster, member string) string { return gceName(cluster, member) }

// clusterTag is the network tag of every instance of the cluster, which its
// firewall rules target.
func clusterTag(cluster string) string { return gceName(cluster) }

// Firewall rules of a cluster: the gateway's access, and the members'.
func gatewayRuleName(cluster string) string  { return gceName(cluster, "gateway") }
func internalRuleName(cluster string) string { return gceName(cluster, "internal") }

// secretID is the cluster's Secret Manager secret.
func secretID(cluster string) string { return gceName(cluster, "tls") }

// Labels and metadata keys that identify a member.
const (
	keyGateway = "gateway-id"
	keyCluster = "gateway-cluster"
	keyMember  = "gateway-member"
	keyRole    = "gateway-role"
	keyOwner   = "gateway-owner"
)

// Guest attributes the startup script sets (namespace gateway).
const (
	guestNamespace = "gateway"
	guestReady     = "ready"
	guestStatus    = "status"
)

// regionOf returns the region of a zone ("us-central1-a" -> "us-central1").
func regionOf(zone string) string {
	if i := strings.LastIndex(zone, "-"); i > 0 {
		return zone[:i]
	}
	return zone
}

// lastSegment returns what follows the last "/" of a resource URL.
func lastSegment(ref string) string {
	if i := strings.LastIndex(ref, "/"); i >= 0 {
		return ref[i+1:]
	}
	return ref
}

// networkURL makes the network a partial URL with the project, which both
// instances and firewall rules accept.
func networkURL(project, network string) string {
	switch {
	case strings.HasPrefix(network, "https://"), strings.HasPrefix(network, "projects/"):
		return network
	case strings.Contains(network, "/"):
		return "projects/" + project + "/" + strings.TrimPrefix(network, "/")
	}
	return "projects/" + project + "/global/networks/" + network
}

// subnetworkURL makes the subnetwork a partial URL in the zone's region.
func subnetworkURL(project, subnetwork, zone string) string {
	switch {
	case subnetwork == "":
		return ""
	case strings.HasPrefix(subnetwork, "https://"), strings.HasPrefix(subnetwork, "projects/"):
		return subnetwork
	case strings.Contains(subnetwork, "/"):
		return "projects/" + project + "/" + strings.TrimPrefix(subnetwork, "/")
	}
	return "projects/" + project + "/regions/" + regionOf(zone) + "/subnetworks/" + subnetwork
}

// newRequestID makes the UUID that makes an insert idempotent: the API
// answers a repeated request with the same ID (a retry after a lost
// answer) with the first request's operation instead of acting twice.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// shellQuote quotes s for a POSIX shell: the startup script embeds names,
// addresses and image references that come from users.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
