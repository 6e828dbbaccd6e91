package awsutil

import (
	"net/netip"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Ingress is what a cluster's security group admits: the scheduler's TLS
// and dashboard ports (FromPort to ToPort) from the gateway's security
// group (or, as a fallback, its address ranges), and every TCP port from
// the group itself. Nothing is open to 0.0.0.0/0: the gateway proxies
// every client connection, and members talk to each other through the
// group's reference to itself, so one cluster's members never admit
// another's.
type Ingress struct {
	GatewayGroup     string   // the gateway's own security group, or ""
	GatewayCIDRs     []string // valid prefixes (the backends' configurations check them)
	FromPort, ToPort int32
}

// Rules are the group's wanted ingress rules.
func (in Ingress) Rules(groupID string) []types.IpPermission {
	gw := types.IpPermission{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(in.FromPort), ToPort: aws.Int32(in.ToPort)}
	desc := aws.String("Dask TLS and dashboard from the gateway")
	if in.GatewayGroup != "" {
		gw.UserIdGroupPairs = []types.UserIdGroupPair{{GroupId: aws.String(in.GatewayGroup), Description: desc}}
	}
	for _, c := range in.GatewayCIDRs {
		if pf := netip.MustParsePrefix(c); pf.Addr().Is4() {
			gw.IpRanges = append(gw.IpRanges, types.IpRange{CidrIp: aws.String(pf.String()), Description: desc})
		} else {
			gw.Ipv6Ranges = append(gw.Ipv6Ranges, types.Ipv6Range{CidrIpv6: aws.String(pf.String()), Description: desc})
		}
	}
	self := types.IpPermission{
		IpProtocol: aws.String("tcp"), FromPort: aws.Int32(0), ToPort: aws.Int32(65535),
		UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String(groupID), Description: aws.String("workers and scheduler of the same cluster")}},
	}
	return []types.IpPermission{gw, self}
}

// Missing is what of the wanted rules (Rules) the group's rules have
// lack. EC2 refuses a whole AuthorizeSecurityGroupIngress call if one rule
// in it exists, so only the missing ones may be sent.
func Missing(want, have []types.IpPermission) []types.IpPermission {
	return outside(want, have, true)
}

// Stale is what the group's rules have admit beyond the wanted ones: each
// source of each permission that no wanted rule has, to revoke.
func Stale(want, have []types.IpPermission) []types.IpPermission {
	return outside(have, want, false)
}

// outside is each source of each permission of perms that others lack,
// grouped by permission; keep keeps the sources' descriptions (to send
// them), else only what EC2 identifies a rule by.
func outside(perms, others []types.IpPermission, keep bool) []types.IpPermission {
	present := sources(others)
	var out []types.IpPermission
	for _, p := range perms {
		r := sourceOf(p)
		miss := types.IpPermission{IpProtocol: p.IpProtocol, FromPort: p.FromPort, ToPort: p.ToPort}
		for _, x := range p.IpRanges {
			if r.src = aws.ToString(x.CidrIp); !present[r] {
				if !keep {
					x = types.IpRange{CidrIp: x.CidrIp}
				}
				miss.IpRanges = append(miss.IpRanges, x)
			}
		}
		for _, x := range p.Ipv6Ranges {
			if r.src = aws.ToString(x.CidrIpv6); !present[r] {
				if !keep {
					x = types.Ipv6Range{CidrIpv6: x.CidrIpv6}
				}
				miss.Ipv6Ranges = append(miss.Ipv6Ranges, x)
			}
		}
		for _, x := range p.UserIdGroupPairs {
			if r.src = aws.ToString(x.GroupId); !present[r] {
				if !keep {
					x = types.UserIdGroupPair{GroupId: x.GroupId}
				}
				miss.UserIdGroupPairs = append(miss.UserIdGroupPairs, x)
			}
		}
		if len(miss.IpRanges)+len(miss.Ipv6Ranges)+len(miss.UserIdGroupPairs) > 0 {
			out = append(out, miss)
		}
	}
	return out
}

// source is what EC2 tells ingress rules apart by: protocol, ports and
// one source (a CIDR or a group id), whatever the description.
type source struct {
	proto    string
	from, to int32
	src      string
}

// sourceOf is perm's protocol and ports, its source left to fill in.
func sourceOf(perm types.IpPermission) source {
	return source{proto: aws.ToString(perm.IpProtocol), from: aws.ToInt32(perm.FromPort), to: aws.ToInt32(perm.ToPort)}
}

// sources is every source of every permission in perms.
func sources(perms []types.IpPermission) map[source]bool {
	set := map[source]bool{}
	for _, perm := range perms {
		r := sourceOf(perm)
		for _, x := range perm.IpRanges {
			r.src = aws.ToString(x.CidrIp)
			set[r] = true
		}
		for _, x := range perm.Ipv6Ranges {
			r.src = aws.ToString(x.CidrIpv6)
			set[r] = true
		}
		for _, x := range perm.UserIdGroupPairs {
			r.src = aws.ToString(x.GroupId)
			set[r] = true
		}
	}
	return set
}
