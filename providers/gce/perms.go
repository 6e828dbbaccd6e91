package gce

import (
	"maps"
	"slices"
)

// callPermissions maps every Compute Engine and Secret Manager call the
// provider makes (its client field and method, as in p.instances.Insert)
// to the IAM permissions Google checks for it as the provider makes it. A
// test keeps this table and the calls in the code equal both ways, and the
// Terraform module's custom role is checked against Permissions.
func callPermissions() map[string][]string {
	return map[string][]string{
		// An instance with labels, network tags, startup metadata and a
		// service account, a new boot disk (labelled) from an image, on a
		// subnetwork or an auto-mode network, without an external address.
		"instances.Insert": {
			"compute.instances.create", "compute.instances.setLabels", "compute.instances.setTags",
			"compute.instances.setMetadata", "compute.instances.setServiceAccount",
			"compute.disks.create", "compute.disks.setLabels", "compute.images.useReadOnly",
			"compute.subnetworks.use", "compute.networks.use",
		},
		"instances.Delete":             {"compute.instances.delete"},
		"instances.Get":                {"compute.instances.get"},
		"instances.GetGuestAttributes": {"compute.instances.getGuestAttributes"},
		"instances.AggregatedList":     {"compute.instances.list"},
		"zoneOps.List":                 {"compute.zoneOperations.list"},
		"zoneOps.Wait":                 {"compute.zoneOperations.get"},
		"globalOps.Wait":               {"compute.globalOperations.get"},
		// A firewall rule changes its network's policy.
		"firewalls.Insert":  {"compute.firewalls.create", "compute.networks.updatePolicy"},
		"firewalls.Delete":  {"compute.firewalls.delete", "compute.networks.updatePolicy"},
		"firewalls.Get":     {"compute.firewalls.get"},
		"firewalls.List":    {"compute.firewalls.list"},
		"firewalls.Update":  {"compute.firewalls.update", "compute.networks.updatePolicy"},
		"machineTypes.List": {"compute.machineTypes.list"},
		"accelTypes.List":   {"compute.acceleratorTypes.list"},
		// The per-cluster TLS secret (secrets.go speaks the REST API).
		"secrets.create":      {"secretmanager.secrets.create"},
		"secrets.get":         {"secretmanager.secrets.get"},
		"secrets.delete":      {"secretmanager.secrets.delete"},
		"secrets.list":        {"secretmanager.secrets.list"},
		"secrets.addVersion":  {"secretmanager.versions.add"},
		"secrets.access":      {"secretmanager.versions.access"},
		"secrets.grantAccess": {"secretmanager.secrets.setIamPolicy"},
	}
}

// Permissions returns the project-level IAM permissions the gateway's
// identity needs for this provider, sorted. Running instances as the
// members' service account also needs iam.serviceAccounts.actAs, which is
// granted on that one account (roles/iam.serviceAccountUser), not here.
func Permissions() []string {
	var out []string
	for ps := range maps.Values(callPermissions()) {
		out = append(out, ps...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
