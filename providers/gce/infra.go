package gce

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/gatewayhq/gateway/providers"
)

// ensureInfra makes what every member of the cluster needs before it boots:
// the firewall rules and the TLS secret. It is idempotent; once done it is
// remembered, so that starting the next workers costs no calls.
func (p *Provider) ensureInfra(ctx context.Context, spec providers.ClusterSpec) error {
	p.mu.Lock()
	ready := p.state(spec.Name).infraReady
	p.mu.Unlock()
	if ready {
		return nil
	}
	for _, fw := range p.firewallRules(spec.Name) {
		if err := p.ensureFirewall(ctx, spec.Name, fw); err != nil {
			return err
		}
	}
	if err := p.ensureSecret(ctx, spec); err != nil {
		return err
	}
	p.mu.Lock()
	p.state(spec.Name).infraReady = true
	p.mu.Unlock()
	return nil
}

// ownerMark starts the description of the provider's firewall rules:
// firewall rules have no labels, and a rule of the same name made by
// someone else must be neither used nor deleted.
func (p *Provider) ownerMark(cluster string) string {
	return fmt.Sprintf("gateway-id=%s gateway-cluster=%s:", p.cfg.GatewayID, cluster)
}

// firewallRules are the cluster's two ingress rules: Dask TLS and the
// dashboard from the gateway only, and any TCP between the cluster's own
// instances, by its network tag (workers and scheduler connect to each
// other on ports Dask picks). The gateway is admitted by its service
// account, which Google does not let a rule mix with network tags: that
// rule targets the members' service account, so it admits the gateway,
// and nothing else, to every cluster's scheduler. Neither rule has
// 0.0.0.0/0: New refuses such a range.
func (p *Provider) firewallRules(cluster string) []*computepb.Firewall {
	tag := clusterTag(cluster)
	gw := &computepb.Firewall{
		Name:        ptr(gatewayRuleName(cluster)),
		Description: ptr(p.ownerMark(cluster) + " Dask TLS and dashboard of the cluster's scheduler, from the gateway only"),
		Network:     ptr(p.network),
		Direction:   ptr("INGRESS"),
		Priority:    ptr(int32(1000)),
		Allowed: []*computepb.Allowed{{
			IPProtocol: ptr("tcp"),
			Ports:      []string{strconv.Itoa(SchedulerPort) + "-" + strconv.Itoa(DashboardPort)},
		}},
	}
	if p.cfg.GatewayServiceAccount != "" {
		gw.SourceServiceAccounts = []string{p.cfg.GatewayServiceAccount}
		gw.TargetServiceAccounts = []string{p.cfg.ServiceAccount}
	} else {
		gw.SourceRanges = append([]string(nil), p.cfg.GatewayCIDRs...)
		gw.TargetTags = []string{tag}
	}
	return []*computepb.Firewall{
		gw,
		{
			Name:        ptr(internalRuleName(cluster)),
			Description: ptr(p.ownerMark(cluster) + " traffic between the cluster's scheduler and workers"),
			Network:     ptr(p.network),
			Direction:   ptr("INGRESS"),
			Priority:    ptr(int32(1000)),
			SourceTags:  []string{tag},
			TargetTags:  []string{tag},
			Allowed:     []*computepb.Allowed{{IPProtocol: ptr("tcp")}},
		},
	}
}

func (p *Provider) ensureFirewall(ctx context.Context, cluster string, fw *computepb.Firewall) error {
	name := fw.GetName()
	var op *compute.Operation
	err := p.call(ctx, "insert firewall "+name, func(ctx context.Context) error {
		var err error
		op, err = p.firewalls.Insert(ctx, &computepb.InsertFirewallRequest{Project: p.cfg.Project, FirewallResource: fw})
		return err
	})
	if err == nil {
		var done *computepb.Operation
		if done, err = p.waitGlobalOp(ctx, op.Proto(), "insert of firewall "+name); err != nil {
			return fmt.Errorf("firewall rule %s: %w", name, err)
		}
		err = opError(done)
	}
	if err != nil && isAlreadyExists(err) {
		existing, gerr := p.getFirewall(ctx, name)
		if gerr != nil {
			return fmt.Errorf("firewall rule %s exists, and reading it failed: %w", name, gerr)
		}
		if !strings.HasPrefix(existing.GetDescription(), p.ownerMark(cluster)) {
			return fmt.Errorf("firewall rule %s exists but was not made by gateway %s for cluster %s (its description is %q); delete it or rename the cluster",
				name, p.cfg.GatewayID, cluster, existing.GetDescription())
		}
		if sameAdmission(existing, fw) {
			return nil
		}
		// Made under an earlier configuration (gateway_cidrs, say): a
		// running cluster must not stay open to what is no longer wanted.
		return p.updateFirewall(ctx, cluster, fw)
	}
	if err != nil {
		return fmt.Errorf("firewall rule %s: %w", name, err)
	}
	p.log.Info("created firewall rule", "cluster", cluster, "rule", name)
	return nil
}

// sameAdmission reports whether two rules admit the same sources to the
// same targets on the same protocols and ports.
func sameAdmission(a, b *computepb.Firewall) bool {
	set := func(xs []string) string { return strings.Join(slices.Sorted(slices.Values(xs)), ",") }
	allowed := func(f *computepb.Firewall) string {
		var out []string
		for _, al := range f.GetAllowed() {
			out = append(out, al.GetIPProtocol()+":"+set(al.GetPorts()))
		}
		return set(out)
	}
	return set(a.GetSourceRanges()) == set(b.GetSourceRanges()) && set(a.GetSourceTags()) == set(b.GetSourceTags()) &&
		set(a.GetSourceServiceAccounts()) == set(b.GetSourceServiceAccounts()) && set(a.GetTargetTags()) == set(b.GetTargetTags()) &&
		set(a.GetTargetServiceAccounts()) == set(b.GetTargetServiceAccounts()) && allowed(a) == allowed(b) && a.GetDisabled() == b.GetDisabled()
}

// updateFirewall replaces the cluster's rule whole (PUT: a PATCH cannot
// clear a list, such as the source ranges a rule by service account must
// not have).
func (p *Provider) updateFirewall(ctx context.Context, cluster string, fw *computepb.Firewall) error {
	name := fw.GetName()
	var op *compute.Operation
	err := p.call(ctx, "update firewall "+name, func(ctx context.Context) error {
		var err error
		op, err = p.firewalls.Update(ctx, &computepb.UpdateFirewallRequest{Project: p.cfg.Project, Firewall: name, FirewallResource: fw})
		return err
	})
	if err != nil {
		return fmt.Errorf("update firewall rule %s: %w", name, err)
	}
	done, err := p.waitGlobalOp(ctx, op.Proto(), "update of firewall "+name)
	if err != nil {
		return fmt.Errorf("update firewall rule %s: %w", name, err)
	}
	if err := opError(done); err != nil {
		return fmt.Errorf("update firewall rule %s: %w", name, err)
	}
	p.log.Info("updated firewall rule to the current configuration", "cluster", cluster, "rule", name)
	return nil
}

func (p *Provider) getFirewall(ctx context.Context, name string) (*computepb.Firewall, error) {
	var fw *computepb.Firewall
	err := p.call(ctx, "get firewall "+name, func(ctx context.Context) error {
		var err error
		fw, err = p.firewalls.Get(ctx, &computepb.GetFirewallRequest{Project: p.cfg.Project, Firewall: name})
		return err
	})
	return fw, err
}

// deleteFirewall deletes the rule if it is the cluster's; a rule that is
// gone or someone else's is left alone.
func (p *Provider) deleteFirewall(ctx context.Context, cluster, name string) error {
	fw, err := p.getFirewall(ctx, name)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("firewall rule %s: %w", name, err)
	}
	if !strings.HasPrefix(fw.GetDescription(), p.ownerMark(cluster)) {
		p.log.Warn("not deleting a firewall rule this gateway did not make", "rule", name, "description", fw.GetDescription())
		return nil
	}
	var op *compute.Operation
	err = p.call(ctx, "delete firewall "+name, func(ctx context.Context) error {
		var err error
		op, err = p.firewalls.Delete(ctx, &computepb.DeleteFirewallRequest{Project: p.cfg.Project, Firewall: name})
		return err
	})
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete firewall rule %s: %w", name, err)
	}
	done, err := p.waitGlobalOp(ctx, op.Proto(), "delete of firewall "+name)
	if err != nil {
		return fmt.Errorf("delete firewall rule %s: %w", name, err)
	}
	if err := opError(done); err != nil && !isGone(err) {
		return fmt.Errorf("delete firewall rule %s: %w", name, err)
	}
	return nil
}

func isGone(err error) bool {
	var oerr *OperationError
	if errors.As(err, &oerr) {
		return oerr.Has("RESOURCE_NOT_FOUND")
	}
	return isNotFound(err)
}

// tlsPayload is what the secret holds: the certificate (CA, server and
// client in one) and the key, as PEM; the startup script splits them.
func tlsPayload(spec providers.ClusterSpec) []byte {
	var b bytes.Buffer
	b.Write(spec.TLSCert)
	if !bytes.HasSuffix(spec.TLSCert, []byte("\n")) {
		b.WriteByte('\n')
	}
	b.Write(spec.TLSKey)
	return b.Bytes()
}

// ensureSecret makes the cluster's secret, stores the TLS material as its
// latest version (once: a repeated call finds it there), and lets the
// instances' service account read it.
func (p *Provider) ensureSecret(ctx context.Context, spec providers.ClusterSpec) error {
	id := secretID(spec.Name)
	err := p.call(ctx, "create secret "+id, func(ctx context.Context) error {
		return p.secrets.create(ctx, id, p.labels(spec.Name))
	})
	if isAlreadyExists(err) {
		if err := p.checkSecretOwner(ctx, id, spec.Name); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("create secret %s: %w", id, err)
	}
	payload := tlsPayload(spec)
	var current []byte
	err = p.call(ctx, "access secret "+id, func(ctx context.Context) error {
		var err error
		current, err = p.secrets.access(ctx, id)
		return err
	})
	switch {
	case isNotFound(err) || (err == nil && !bytes.Equal(current, payload)):
		if err := p.call(ctx, "add secret version "+id, func(ctx context.Context) error {
			return p.secrets.addVersion(ctx, id, payload)
		}); err != nil {
			return fmt.Errorf("store the TLS material in secret %s: %w", id, err)
		}
	case err != nil:
		return fmt.Errorf("read secret %s: %w", id, err)
	}
	if err := p.call(ctx, "grant access to secret "+id, func(ctx context.Context) error {
		return p.secrets.grantAccess(ctx, id, "serviceAccount:"+p.cfg.ServiceAccount)
	}); err != nil {
		return fmt.Errorf("let %s read secret %s: %w", p.cfg.ServiceAccount, id, err)
	}
	return nil
}

// checkSecretOwner refuses a secret of the same ID that is not the
// cluster's: its labels must name this gateway and cluster.
func (p *Provider) checkSecretOwner(ctx context.Context, id, cluster string) error {
	var s secretResource
	err := p.call(ctx, "get secret "+id, func(ctx context.Context) error {
		var err error
		s, err = p.secrets.get(ctx, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("secret %s exists, and reading it failed: %w", id, err)
	}
	if s.Labels[keyGateway] != p.gwLabel || s.Labels[keyCluster] != labelValue(cluster) {
		return fmt.Errorf("secret %s exists but is not gateway %s's for cluster %s (labels %v); delete it or rename the cluster", id, p.cfg.GatewayID, cluster, s.Labels)
	}
	return nil
}

// deleteSecret deletes the cluster's secret; gone is fine, someone else's
// is left alone.
func (p *Provider) deleteSecret(ctx context.Context, cluster string) error {
	id := secretID(cluster)
	var s secretResource
	err := p.call(ctx, "get secret "+id, func(ctx context.Context) error {
		var err error
		s, err = p.secrets.get(ctx, id)
		return err
	})
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read secret %s: %w", id, err)
	}
	if s.Labels[keyGateway] != p.gwLabel || s.Labels[keyCluster] != labelValue(cluster) {
		p.log.Warn("not deleting a secret this gateway did not make", "secret", id, "labels", s.Labels)
		return nil
	}
	err = p.call(ctx, "delete secret "+id, func(ctx context.Context) error { return p.secrets.delete(ctx, id) })
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("delete secret %s: %w", id, err)
	}
	return nil
}
