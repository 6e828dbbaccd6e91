package gce

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/gatewayhq/gateway/providers"
)

// maxSecretPages bounds the listing of secrets.
const maxSecretPages = 100

// ListLeftovers lists this gateway's firewall rules and TLS secrets
// directly, not through instances: a cluster whose instances are all gone
// would otherwise leave them for the operator. Firewall rules have no
// labels: they are this gateway's by the owner mark that starts their
// description, and a cluster's by that mark and their name together.
// Secrets are listed by their gateway-id label; since label values may be
// shortened and hashed, a secret counts only when its gateway-cluster
// label names the very cluster its ID is made for.
func (p *Provider) ListLeftovers(ctx context.Context) ([]providers.Leftover, error) {
	rules, err := p.leftoverFirewalls(ctx)
	if err != nil {
		return nil, fmt.Errorf("gce provider: %w", err)
	}
	secrets, err := p.leftoverSecrets(ctx)
	if err != nil {
		return nil, fmt.Errorf("gce provider: %w", err)
	}
	return append(rules, secrets...), nil
}

// leftoverFirewalls lists the rules named gw-... (the list filter's "eq"
// is a regular expression over the whole name) and keeps this gateway's.
func (p *Provider) leftoverFirewalls(ctx context.Context) ([]providers.Leftover, error) {
	var rules []*computepb.Firewall
	err := p.call(ctx, "list firewall rules", func(ctx context.Context) error {
		rules = rules[:0]
		it := p.firewalls.List(ctx, &computepb.ListFirewallsRequest{Project: p.cfg.Project, Filter: ptr(`name eq "gw-.*"`)})
		for fw, err := range it.All() {
			if err != nil {
				return err
			}
			rules = append(rules, fw)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list firewall rules: %w", err)
	}
	mark := "gateway-id=" + p.cfg.GatewayID + " gateway-cluster="
	var out []providers.Leftover
	for _, fw := range rules {
		rest, ok := strings.CutPrefix(fw.GetDescription(), mark)
		if !ok {
			continue
		}
		cluster, _, ok := strings.Cut(rest, ":")
		name := fw.GetName()
		if !ok || cluster == "" || !strings.HasPrefix(fw.GetDescription(), p.ownerMark(cluster)) ||
			(name != gatewayRuleName(cluster) && name != internalRuleName(cluster)) {
			continue
		}
		out = append(out, providers.Leftover{Kind: providers.LeftoverFirewall, ID: name, Cluster: cluster, Created: parseTime(fw.GetCreationTimestamp())})
	}
	return out, nil
}

// leftoverSecrets lists the secrets labelled gateway-id = this gateway.
func (p *Provider) leftoverSecrets(ctx context.Context) ([]providers.Leftover, error) {
	var out []providers.Leftover
	token := ""
	for range maxSecretPages {
		var page secretList
		err := p.call(ctx, "list secrets", func(ctx context.Context) error {
			var err error
			page, err = p.secrets.list(ctx, "labels."+keyGateway+"="+p.gwLabel, token)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("list secrets: %w", err)
		}
		for _, s := range page.Secrets {
			id := lastSegment(s.Name)
			cluster := s.Labels[keyCluster]
			if s.Labels[keyGateway] != p.gwLabel || cluster == "" || labelValue(cluster) != cluster || secretID(cluster) != id {
				continue
			}
			out = append(out, providers.Leftover{Kind: providers.LeftoverSecret, ID: id, Cluster: cluster, Created: parseTime(s.CreateTime)})
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	return out, nil
}

// DeleteLeftover removes a firewall rule or secret ListLeftovers found;
// one already gone is success, and one that turns out not to be the
// cluster's is left alone.
func (p *Provider) DeleteLeftover(ctx context.Context, l providers.Leftover) error {
	var err error
	switch l.Kind {
	case providers.LeftoverFirewall:
		if l.ID != gatewayRuleName(l.Cluster) && l.ID != internalRuleName(l.Cluster) {
			return fmt.Errorf("gce provider: %s is not a firewall rule of cluster %s", l.ID, l.Cluster)
		}
		err = p.deleteFirewall(ctx, l.Cluster, l.ID)
	case providers.LeftoverSecret:
		if l.ID != secretID(l.Cluster) {
			return fmt.Errorf("gce provider: %s is not the secret of cluster %s", l.ID, l.Cluster)
		}
		err = p.deleteSecret(ctx, l.Cluster)
	default:
		return fmt.Errorf("gce provider: no leftover of kind %q", l.Kind)
	}
	if err != nil {
		return fmt.Errorf("gce provider: remove leftover of %s: %w", l.Cluster, err)
	}
	p.mu.Lock()
	if st := p.clusters[l.Cluster]; st != nil {
		st.infraReady = false
	}
	p.mu.Unlock()
	return nil
}

// secretList is one page of Secret Manager's secrets.list.
type secretList struct {
	Secrets []struct {
		Name       string            `json:"name"`
		Labels     map[string]string `json:"labels"`
		CreateTime string            `json:"createTime"`
	} `json:"secrets"`
	NextPageToken string `json:"nextPageToken"`
}

// list returns one page of the project's secrets that filter selects
// (Secret Manager's filter language: labels.KEY=VALUE).
func (c *secretClient) list(ctx context.Context, filter, pageToken string) (secretList, error) {
	q := url.Values{"filter": {filter}, "pageSize": {strconv.Itoa(250)}}
	if pageToken != "" {
		q.Set("pageToken", pageToken)
	}
	var out secretList
	err := c.do(ctx, http.MethodGet, "secrets", q, nil, &out)
	return out, err
}
