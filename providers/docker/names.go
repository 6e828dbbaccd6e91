package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/gatewayhq/gateway/providers"
)

// maxNameLen bounds container names: Docker accepts long names, but people
// read them in `docker ps`.
const maxNameLen = 128

// containerName is the deterministic name of a member's container,
// "gw-<gateway>-<cluster>-<member>": the engine refuses a second container
// of that name, which makes starts idempotent even across gateway restarts.
// Characters Docker does not allow in names are replaced, and a short hash
// of the exact triple is appended whenever the name had to be changed, so
// that two members never share a name. The ownership labels, not the name,
// say whose a container is.
func containerName(gatewayID, cluster, member string) string {
	return safeName("gw-"+gatewayID+"-"+cluster+"-"+member, gatewayID+"\x00"+cluster+"\x00"+member)
}

// safeName is raw with the characters Docker refuses in names replaced,
// and cut to maxNameLen, a short hash of key appended whenever it changed.
func safeName(raw, key string) string {
	var b strings.Builder
	for _, r := range raw {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if name == raw && len(name) <= maxNameLen {
		return name
	}
	sum := sha256.Sum256([]byte(key))
	suffix := "-" + hex.EncodeToString(sum[:4])
	if len(name) > maxNameLen-len(suffix) {
		name = name[:maxNameLen-len(suffix)]
	}
	return name + suffix
}

func checkWorker(worker string) error {
	if !providers.PlainName(worker) || worker == "scheduler" {
		return fmt.Errorf("docker provider: invalid worker name %q", worker)
	}
	return nil
}

func checkCluster(cluster string) error {
	if !providers.PlainName(cluster) {
		return fmt.Errorf("docker provider: invalid cluster name %q", cluster)
	}
	return nil
}

// labels are the ownership labels of a member's container.
func (p *Provider) labels(spec providers.ClusterSpec, member string, role providers.Role) map[string]string {
	return map[string]string{
		labelGateway: p.cfg.GatewayID,
		labelCluster: spec.Name,
		labelMember:  member,
		labelRole:    string(role),
		labelOwner:   spec.Owner,
	}
}

// owns reports whether a container's labels say it is this gateway's
// container for the member.
func (p *Provider) owns(labels map[string]string, cluster, member string) bool {
	return labels[labelGateway] == p.cfg.GatewayID && labels[labelCluster] == cluster && labels[labelMember] == member
}
