# Two service accounts:
#
#   - the gateway's, which its VMs run as: it creates and deletes the Dask
#     clusters' instances, firewall rules and per-cluster secrets;
#   - the Dask members', which every scheduler and worker VM runs as: it
#     writes logs, pulls environment images, and reads its own cluster's TLS
#     secret, on which the gateway grants it access cluster by cluster.
#
# The gateway gets, project-wide, a custom role with exactly the permissions
# its Compute Engine backend calls need (a test compares the list below with
# the one the Go code declares, providers/gce/perms.go), plus log and metric
# writing for its VMs. No secretmanager.secrets.getIamPolicy: the gateway
# replaces a per-cluster secret's policy whole, it never reads it.
# compute.disks.setLabels: the members' boot disks carry the ownership
# labels.
# Everything else is granted on one resource: running instances as the
# members' account (actAs on that account alone, so the gateway cannot start
# VMs as any other identity of the project), writing to the environment
# repository, reading its own secrets.

resource "google_service_account" "gateway" {
  project      = var.project
  account_id   = "${local.sa_prefix}-gateway"
  display_name = "Gateway ${var.gateway_id}"
  description  = "The gateway's VMs: manage Dask clusters' instances, firewall rules and secrets."
}

resource "google_service_account" "members" {
  project      = var.project
  account_id   = "${local.sa_prefix}-members"
  display_name = "Gateway ${var.gateway_id} Dask members"
  description  = "Every Dask scheduler and worker of gateway ${var.gateway_id}. Give it nothing else: users' code runs as it."
}

resource "google_project_iam_custom_role" "gateway" {
  project     = var.project
  role_id     = "gateway_${replace(var.gateway_id, "-", "_")}"
  title       = "Gateway ${var.gateway_id}"
  description = "What the gateway's Compute Engine backend calls: members' instances, their firewall rules, zone operations, machine and accelerator types, per-cluster Secret Manager secrets."
  stage       = "GA"
  permissions = [
    "compute.acceleratorTypes.list",
    "compute.disks.create",
    "compute.disks.setLabels",
    "compute.firewalls.create",
    "compute.firewalls.delete",
    "compute.firewalls.get",
    "compute.firewalls.list",
    "compute.firewalls.update",
    "compute.globalOperations.get",
    "compute.images.useReadOnly",
    "compute.instances.create",
    "compute.instances.delete",
    "compute.instances.get",
    "compute.instances.getGuestAttributes",
    "compute.instances.list",
    "compute.instances.setLabels",
    "compute.instances.setMetadata",
    "compute.instances.setServiceAccount",
    "compute.instances.setTags",
    "compute.machineTypes.list",
    "compute.networks.updatePolicy",
    "compute.networks.use",
    "compute.subnetworks.use",
    "compute.zoneOperations.get",
    "compute.zoneOperations.list",
    "secretmanager.secrets.create",
    "secretmanager.secrets.delete",
    "secretmanager.secrets.get",
    "secretmanager.secrets.list",
    "secretmanager.secrets.setIamPolicy",
    "secretmanager.versions.access",
    "secretmanager.versions.add",
  ]
}

resource "google_project_iam_member" "gateway_role" {
  project = var.project
  role    = google_project_iam_custom_role.gateway.name
  member  = "serviceAccount:${google_service_account.gateway.email}"
}

# The gateway's VMs ship their logs (the container's JSON logs) and metrics.
resource "google_project_iam_member" "gateway_telemetry" {
  for_each = toset(["roles/logging.logWriter", "roles/monitoring.metricWriter"])
  project  = var.project
  role     = each.value
  member   = "serviceAccount:${google_service_account.gateway.email}"
}

# The members write their logs; nothing else project-wide.
resource "google_project_iam_member" "members_logs" {
  project = var.project
  role    = "roles/logging.logWriter"
  member  = "serviceAccount:${google_service_account.members.email}"
}

# The gateway starts instances that run as the members' service account
# (iam.serviceAccounts.actAs), on that account only.
resource "google_service_account_iam_member" "gateway_acts_as_members" {
  service_account_id = google_service_account.members.name
  role               = "roles/iam.serviceAccountUser"
  member             = "serviceAccount:${google_service_account.gateway.email}"
}
