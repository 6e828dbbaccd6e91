package fargatetest

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// Rule is one ingress (or egress) permission of a security group: from a
// CIDR or from a group.
type Rule struct {
	Protocol    string // "tcp", "-1"
	FromPort    int
	ToPort      int
	CIDR        string // IPv4 or IPv6
	SourceGroup string
	Description string
}

type group struct {
	id, name, description, vpc string
	tags                       map[string]string
	ingress, egress            []Rule
}

// ---- wire shapes ----

type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type xmlRange struct {
	CidrIP      string `xml:"cidrIp,omitempty"`
	Description string `xml:"description,omitempty"`
}

type xmlRange6 struct {
	CidrIPv6    string `xml:"cidrIpv6,omitempty"`
	Description string `xml:"description,omitempty"`
}

type xmlPair struct {
	UserID      string `xml:"userId,omitempty"`
	GroupID     string `xml:"groupId"`
	Description string `xml:"description,omitempty"`
}

type xmlPermission struct {
	IPProtocol string      `xml:"ipProtocol"`
	FromPort   *int        `xml:"fromPort,omitempty"`
	ToPort     *int        `xml:"toPort,omitempty"`
	Groups     []xmlPair   `xml:"groups>item"`
	IPRanges   []xmlRange  `xml:"ipRanges>item"`
	IPv6Ranges []xmlRange6 `xml:"ipv6Ranges>item"`
}

type xmlGroup struct {
	OwnerID     string          `xml:"ownerId"`
	GroupID     string          `xml:"groupId"`
	GroupName   string          `xml:"groupName"`
	Description string          `xml:"groupDescription"`
	VpcID       string          `xml:"vpcId"`
	ARN         string          `xml:"securityGroupArn"`
	Ingress     []xmlPermission `xml:"ipPermissions>item"`
	Egress      []xmlPermission `xml:"ipPermissionsEgress>item"`
	Tags        []xmlTag        `xml:"tagSet>item"`
}

type xmlSubnet struct {
	SubnetID         string `xml:"subnetId"`
	VpcID            string `xml:"vpcId"`
	AvailabilityZone string `xml:"availabilityZone"`
	CidrBlock        string `xml:"cidrBlock"`
	State            string `xml:"state"`
}

func (s *Server) serveEC2(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil || r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		writeXMLError(w, clientErr("InvalidRequest", "the EC2 Query API takes a form POST"))
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		writeXMLError(w, clientErr("InvalidRequest", "cannot parse the form: %v", err))
		return
	}
	action := form.Get("Action")
	if form.Get("Version") != "2016-11-15" {
		writeXMLError(w, clientErr("InvalidAction", "unsupported version %q", form.Get("Version")))
		return
	}
	if !checkAuth(r, "ec2") {
		writeXMLError(w, &apiError{status: http.StatusUnauthorized, code: "AuthFailure", message: "AWS was not able to validate the provided access credentials"})
		return
	}
	s.mu.Lock()
	s.record("ec2:"+action, body)
	if f := s.takeFault("ec2:" + action); f != nil {
		s.mu.Unlock()
		writeXMLError(w, &apiError{status: f.status, code: f.code, message: f.message})
		return
	}
	var out any
	var aerr *apiError
	switch action {
	case "DescribeSubnets":
		out, aerr = s.describeSubnets(form)
	case "CreateSecurityGroup":
		out, aerr = s.createSecurityGroup(form)
	case "AuthorizeSecurityGroupIngress":
		out, aerr = s.authorizeIngress(form)
	case "RevokeSecurityGroupIngress":
		out, aerr = s.revokeIngress(form)
	case "DescribeSecurityGroups":
		out, aerr = s.describeSecurityGroups(form)
	case "DeleteSecurityGroup":
		out, aerr = s.deleteSecurityGroup(form)
	default:
		aerr = clientErr("InvalidAction", "The action %s is not valid for this web service.", action)
	}
	lose := s.takeLoss("ec2:" + action)
	s.mu.Unlock()
	if lose != nil {
		answerLoss(w, lose, writeXMLError)
		return
	}
	if aerr != nil {
		writeXMLError(w, aerr)
		return
	}
	b, err := xml.Marshal(out)
	if err != nil {
		writeXMLError(w, &apiError{status: 500, code: "InternalError", message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(b)
}

func writeXMLError(w http.ResponseWriter, e *apiError) {
	type xmlError struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	type response struct {
		XMLName   xml.Name   `xml:"Response"`
		Errors    []xmlError `xml:"Errors>Error"`
		RequestID string     `xml:"RequestID"`
	}
	b, _ := xml.Marshal(response{Errors: []xmlError{{Code: e.code, Message: e.message}}, RequestID: requestID()})
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(e.status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(b)
}

// list reads a flattened query list: prefix.1, prefix.2, ...
func list(form url.Values, prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := form[prefix+"."+strconv.Itoa(i)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

type filter struct {
	name   string
	values []string
}

func filters(form url.Values) []filter {
	var out []filter
	for i := 1; ; i++ {
		p := "Filter." + strconv.Itoa(i)
		name := form.Get(p + ".Name")
		if name == "" {
			return out
		}
		out = append(out, filter{name: name, values: list(form, p+".Value")})
	}
}

func (s *Server) describeSubnets(form url.Values) (any, *apiError) {
	ids := list(form, "SubnetId")
	if len(ids) == 0 {
		ids = sortedKeys(s.subnets)
	}
	var out []xmlSubnet
	for _, id := range ids {
		sn, ok := s.subnets[id]
		if !ok {
			return nil, clientErr("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
		out = append(out, xmlSubnet{SubnetID: sn.id, VpcID: sn.vpc, AvailabilityZone: sn.az, CidrBlock: sn.cidr, State: "available"})
	}
	type response struct {
		XMLName   xml.Name    `xml:"DescribeSubnetsResponse"`
		Xmlns     string      `xml:"xmlns,attr"`
		RequestID string      `xml:"requestId"`
		Subnets   []xmlSubnet `xml:"subnetSet>item"`
	}
	return response{Xmlns: ec2Namespace, RequestID: requestID(), Subnets: out}, nil
}

func (s *Server) createSecurityGroup(form url.Values) (any, *apiError) {
	name, desc, vpc := form.Get("GroupName"), form.Get("GroupDescription"), form.Get("VpcId")
	if name == "" || len(name) > 255 || strings.HasPrefix(strings.ToLower(name), "sg-") {
		return nil, clientErr("InvalidParameterValue", "Invalid value '%s' for groupName.", name)
	}
	if desc == "" || len(desc) > 255 {
		return nil, clientErr("MissingParameter", "The request must contain the parameter GroupDescription")
	}
	if vpc == "" {
		return nil, clientErr("VPCIdNotSpecified", "No default VPC for this user.")
	}
	if !s.vpcs[vpc] {
		return nil, clientErr("InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", vpc)
	}
	for _, g := range s.groups {
		if g.vpc == vpc && g.name == name {
			return nil, clientErr("InvalidGroup.Duplicate", "The security group '%s' already exists for VPC '%s'", name, vpc)
		}
	}
	g := &group{id: "sg-" + randomHex(17), name: name, description: desc, vpc: vpc, tags: map[string]string{},
		egress: []Rule{{Protocol: "-1", CIDR: "0.0.0.0/0"}}} // AWS's default egress rule
	for i := 1; ; i++ {
		p := "TagSpecification." + strconv.Itoa(i)
		rt := form.Get(p + ".ResourceType")
		if rt == "" {
			break
		}
		if rt != "security-group" {
			return nil, clientErr("InvalidParameterValue", "'%s' is not a valid taggable resource type for this operation.", rt)
		}
		for j := 1; ; j++ {
			k := form.Get(p + ".Tag." + strconv.Itoa(j) + ".Key")
			if k == "" {
				break
			}
			g.tags[k] = form.Get(p + ".Tag." + strconv.Itoa(j) + ".Value")
		}
	}
	s.groups[g.id] = g
	type response struct {
		XMLName   xml.Name `xml:"CreateSecurityGroupResponse"`
		Xmlns     string   `xml:"xmlns,attr"`
		RequestID string   `xml:"requestId"`
		GroupID   string   `xml:"groupId"`
		Tags      []xmlTag `xml:"tagSet>item"`
	}
	return response{Xmlns: ec2Namespace, RequestID: requestID(), GroupID: g.id, Tags: tagList(g.tags)}, nil
}

func tagList(tags map[string]string) []xmlTag {
	var out []xmlTag
	for _, k := range sortedKeys(tags) {
		out = append(out, xmlTag{Key: k, Value: tags[k]})
	}
	return out
}

// ingressRules looks up the group an Authorize or Revoke call names and
// parses its IpPermissions, one Rule per source.
func (s *Server) ingressRules(form url.Values) (*group, []Rule, *apiError) {
	id := form.Get("GroupId")
	g, ok := s.groups[id]
	if !ok {
		return nil, nil, clientErr("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
	}
	var rules []Rule
	for i := 1; ; i++ {
		p := "IpPermissions." + strconv.Itoa(i)
		proto := form.Get(p + ".IpProtocol")
		if proto == "" {
			break
		}
		from, err1 := strconv.Atoi(form.Get(p + ".FromPort"))
		to, err2 := strconv.Atoi(form.Get(p + ".ToPort"))
		if proto != "-1" && (err1 != nil || err2 != nil || from < 0 || to > 65535 || from > to) {
			return nil, nil, clientErr("InvalidParameterValue", "Invalid port range %s-%s", form.Get(p+".FromPort"), form.Get(p+".ToPort"))
		}
		if proto != "tcp" && proto != "udp" && proto != "-1" {
			return nil, nil, clientErr("InvalidParameterValue", "Invalid value '%s' for IP protocol.", proto)
		}
		n := len(rules)
		for j := 1; ; j++ {
			q := p + ".IpRanges." + strconv.Itoa(j)
			cidr := form.Get(q + ".CidrIp")
			if cidr == "" {
				break
			}
			if pf, err := netip.ParsePrefix(cidr); err != nil || !pf.Addr().Is4() {
				return nil, nil, clientErr("InvalidParameterValue", "CIDR block %s is malformed", cidr)
			}
			rules = append(rules, Rule{Protocol: proto, FromPort: from, ToPort: to, CIDR: cidr, Description: form.Get(q + ".Description")})
		}
		for j := 1; ; j++ {
			q := p + ".Ipv6Ranges." + strconv.Itoa(j)
			cidr := form.Get(q + ".CidrIpv6")
			if cidr == "" {
				break
			}
			if pf, err := netip.ParsePrefix(cidr); err != nil || !pf.Addr().Is6() {
				return nil, nil, clientErr("InvalidParameterValue", "CIDR block %s is malformed", cidr)
			}
			rules = append(rules, Rule{Protocol: proto, FromPort: from, ToPort: to, CIDR: cidr, Description: form.Get(q + ".Description")})
		}
		for j := 1; ; j++ {
			q := p + ".Groups." + strconv.Itoa(j)
			src := form.Get(q + ".GroupId")
			if src == "" {
				break
			}
			// A referenced group must be in the VPC of the group the rule
			// is added to (or a peered one, which the fake does not have).
			sg, ok := s.groups[src]
			if !ok {
				return nil, nil, clientErr("InvalidGroup.NotFound", "The security group '%s' does not exist", src)
			}
			if sg.vpc != g.vpc {
				return nil, nil, clientErr("InvalidGroup.NotFound", "The security group '%s' does not exist in VPC '%s'", src, g.vpc)
			}
			rules = append(rules, Rule{Protocol: proto, FromPort: from, ToPort: to, SourceGroup: src, Description: form.Get(q + ".Description")})
		}
		if len(rules) == n {
			return nil, nil, clientErr("InvalidParameterValue", "a permission needs a source (CIDR or group)")
		}
	}
	if len(rules) == 0 {
		return nil, nil, clientErr("MissingParameter", "The request must contain the parameter ipPermissions")
	}
	return g, rules, nil
}

func (s *Server) authorizeIngress(form url.Values) (any, *apiError) {
	g, rules, aerr := s.ingressRules(form)
	if aerr != nil {
		return nil, aerr
	}
	// EC2 refuses the whole request when any rule is already there.
	for _, r := range rules {
		if slices.ContainsFunc(g.ingress, func(x Rule) bool { return sameRule(x, r) }) {
			src := r.CIDR
			if src == "" {
				src = r.SourceGroup
			}
			return nil, clientErr("InvalidPermission.Duplicate", "the specified rule \"peer: %s, %s, from port: %d, to port: %d, ALLOW\" already exists", src, strings.ToUpper(r.Protocol), r.FromPort, r.ToPort)
		}
	}
	g.ingress = append(g.ingress, rules...)
	type response struct {
		XMLName   xml.Name `xml:"AuthorizeSecurityGroupIngressResponse"`
		Xmlns     string   `xml:"xmlns,attr"`
		RequestID string   `xml:"requestId"`
		Return    bool     `xml:"return"`
	}
	return response{Xmlns: ec2Namespace, RequestID: requestID(), Return: true}, nil
}

// revokeIngress removes rules as EC2 does in a non-default VPC: each rule
// named must exist (protocol, ports and source), else
// InvalidPermission.NotFound and nothing is removed.
func (s *Server) revokeIngress(form url.Values) (any, *apiError) {
	g, rules, aerr := s.ingressRules(form)
	if aerr != nil {
		return nil, aerr
	}
	for _, r := range rules {
		if !slices.ContainsFunc(g.ingress, func(x Rule) bool { return sameRule(x, r) }) {
			return nil, clientErr("InvalidPermission.NotFound", "The specified rule does not exist in this security group.")
		}
	}
	g.ingress = slices.DeleteFunc(g.ingress, func(x Rule) bool {
		return slices.ContainsFunc(rules, func(r Rule) bool { return sameRule(x, r) })
	})
	type response struct {
		XMLName   xml.Name `xml:"RevokeSecurityGroupIngressResponse"`
		Xmlns     string   `xml:"xmlns,attr"`
		RequestID string   `xml:"requestId"`
		Return    bool     `xml:"return"`
	}
	return response{Xmlns: ec2Namespace, RequestID: requestID(), Return: true}, nil
}

func sameRule(a, b Rule) bool {
	return a.Protocol == b.Protocol && a.FromPort == b.FromPort && a.ToPort == b.ToPort && a.CIDR == b.CIDR && a.SourceGroup == b.SourceGroup
}

func (s *Server) describeSecurityGroups(form url.Values) (any, *apiError) {
	ids, names := list(form, "GroupId"), list(form, "GroupName")
	for _, id := range ids {
		if _, ok := s.groups[id]; !ok {
			return nil, clientErr("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}
	fs := filters(form)
	for _, f := range fs {
		switch {
		case f.name == "vpc-id", f.name == "group-name", f.name == "group-id", f.name == "tag-key", strings.HasPrefix(f.name, "tag:"):
		default:
			return nil, clientErr("InvalidParameterValue", "The filter '%s' is invalid", f.name)
		}
	}
	var out []xmlGroup
	for _, id := range sortedKeys(s.groups) {
		g := s.groups[id]
		if len(ids) > 0 && !slices.Contains(ids, g.id) || len(names) > 0 && !slices.Contains(names, g.name) {
			continue
		}
		if !matchGroup(g, fs) {
			continue
		}
		out = append(out, s.wireGroup(g))
	}
	if len(names) > 0 && len(out) == 0 {
		// EC2 answers this way for a name that is not in the default VPC.
		return nil, clientErr("InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC", names[0])
	}
	type response struct {
		XMLName   xml.Name   `xml:"DescribeSecurityGroupsResponse"`
		Xmlns     string     `xml:"xmlns,attr"`
		RequestID string     `xml:"requestId"`
		Groups    []xmlGroup `xml:"securityGroupInfo>item"`
	}
	return response{Xmlns: ec2Namespace, RequestID: requestID(), Groups: out}, nil
}

func matchGroup(g *group, fs []filter) bool {
	for _, f := range fs {
		var v string
		has := true
		switch {
		case f.name == "vpc-id":
			v = g.vpc
		case f.name == "group-name":
			v = g.name
		case f.name == "group-id":
			v = g.id
		case f.name == "tag-key":
			ok := false
			for _, k := range f.values {
				_, ok2 := g.tags[k]
				ok = ok || ok2
			}
			if !ok {
				return false
			}
			continue
		default:
			v, has = g.tags[strings.TrimPrefix(f.name, "tag:")]
		}
		if !has || !slices.Contains(f.values, v) {
			return false
		}
	}
	return true
}

func wirePerms(rules []Rule) []xmlPermission {
	var out []xmlPermission
	for _, r := range rules {
		p := xmlPermission{IPProtocol: r.Protocol}
		if r.Protocol != "-1" {
			from, to := r.FromPort, r.ToPort
			p.FromPort, p.ToPort = &from, &to
		}
		switch {
		case r.SourceGroup != "":
			p.Groups = []xmlPair{{GroupID: r.SourceGroup, Description: r.Description}}
		case strings.Contains(r.CIDR, ":"):
			p.IPv6Ranges = []xmlRange6{{CidrIPv6: r.CIDR, Description: r.Description}}
		default:
			p.IPRanges = []xmlRange{{CidrIP: r.CIDR, Description: r.Description}}
		}
		out = append(out, p)
	}
	return out
}

func (s *Server) wireGroup(g *group) xmlGroup {
	return xmlGroup{
		OwnerID: s.Account, GroupID: g.id, GroupName: g.name, Description: g.description, VpcID: g.vpc,
		ARN:     fmt.Sprintf("arn:aws:ec2:%s:%s:security-group/%s", s.Region, s.Account, g.id),
		Ingress: wirePerms(g.ingress), Egress: wirePerms(g.egress), Tags: tagList(g.tags),
	}
}

func (s *Server) deleteSecurityGroup(form url.Values) (any, *apiError) {
	id := form.Get("GroupId")
	g, ok := s.groups[id]
	if !ok {
		return nil, clientErr("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
	}
	// A group stays in use while a task's network interface holds it.
	for _, t := range s.tasks {
		if s.holdsGroups(t) && slices.Contains(t.securityGroups, id) {
			return nil, clientErr("DependencyViolation", "resource %s has a dependent object", id)
		}
	}
	for _, other := range s.groups {
		if other.id != id && slices.ContainsFunc(other.ingress, func(r Rule) bool { return r.SourceGroup == id }) {
			return nil, clientErr("DependencyViolation", "resource %s has a dependent object", id)
		}
	}
	delete(s.groups, g.id)
	type response struct {
		XMLName   xml.Name `xml:"DeleteSecurityGroupResponse"`
		Xmlns     string   `xml:"xmlns,attr"`
		RequestID string   `xml:"requestId"`
		Return    bool     `xml:"return"`
		GroupID   string   `xml:"groupId"`
	}
	return response{Xmlns: ec2Namespace, RequestID: requestID(), Return: true, GroupID: id}, nil
}

// Group is a snapshot of one security group.
type Group struct {
	ID, Name, Description, VPC string
	Tags                       map[string]string
	Ingress, Egress            []Rule
}

// Groups returns every security group the fake holds.
func (s *Server) Groups() []Group {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Group
	for _, id := range sortedKeys(s.groups) {
		g := s.groups[id]
		tags := map[string]string{}
		for k, v := range g.tags {
			tags[k] = v
		}
		out = append(out, Group{ID: g.id, Name: g.name, Description: g.description, VPC: g.vpc, Tags: tags,
			Ingress: slices.Clone(g.ingress), Egress: slices.Clone(g.egress)})
	}
	return out
}

// AddGroup makes a security group as someone else would have.
func (s *Server) AddGroup(name, vpc string, tags map[string]string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := &group{id: "sg-" + randomHex(17), name: name, description: "made elsewhere", vpc: vpc, tags: map[string]string{}}
	for k, v := range tags {
		g.tags[k] = v
	}
	s.groups[g.id] = g
	return g.id
}
