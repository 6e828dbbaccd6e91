# The VPC: an existing network and subnetwork (var.network, var.subnetwork),
# or a custom-mode network with one subnetwork that the module creates. The
# gateway's VMs and every Dask scheduler and worker have no external
# address: Private Google Access reaches Google's APIs (Secret Manager,
# Artifact Registry, Compute Engine), Cloud NAT everything else (the OIDC
# issuer, public container images).

locals {
  create_network = var.network == null

  network_name      = local.create_network ? google_compute_network.gateway[0].name : var.network
  network_id        = local.create_network ? google_compute_network.gateway[0].id : data.google_compute_network.existing[0].id
  network_self_link = local.create_network ? google_compute_network.gateway[0].self_link : data.google_compute_network.existing[0].self_link

  subnetwork_name      = local.create_network ? google_compute_subnetwork.gateway[0].name : var.subnetwork
  subnetwork_self_link = local.create_network ? google_compute_subnetwork.gateway[0].self_link : data.google_compute_subnetwork.existing[0].self_link
  # The gateway connects to the schedulers from this range: the firewall
  # rules the gateway makes per cluster open the schedulers' ports to it
  # alone.
  subnetwork_cidr = local.create_network ? google_compute_subnetwork.gateway[0].ip_cidr_range : data.google_compute_subnetwork.existing[0].ip_cidr_range

  # Where Google's health checks come from: 35.191.0.0/16 and 130.211.0.0/22
  # (autohealing and every load balancer), 209.85.152.0/22 and
  # 209.85.204.0/22 (external passthrough Network Load Balancers).
  health_check_ranges = ["35.191.0.0/16", "130.211.0.0/22", "209.85.152.0/22", "209.85.204.0/22"]
}

data "google_compute_network" "existing" {
  count   = local.create_network ? 0 : 1
  project = var.project
  name    = var.network
}

data "google_compute_subnetwork" "existing" {
  count   = local.create_network ? 0 : 1
  project = var.project
  region  = var.region
  name    = var.subnetwork
}

resource "google_compute_network" "gateway" {
  count                   = local.create_network ? 1 : 0
  project                 = var.project
  name                    = local.name
  description             = "Gateway ${var.gateway_id}: its VMs and its Dask clusters."
  auto_create_subnetworks = false
  routing_mode            = "REGIONAL"
}

resource "google_compute_subnetwork" "gateway" {
  count                    = local.create_network ? 1 : 0
  project                  = var.project
  region                   = var.region
  name                     = local.name
  network                  = google_compute_network.gateway[0].id
  ip_cidr_range            = var.subnetwork_cidr
  private_ip_google_access = true
}

resource "google_compute_router" "gateway" {
  count   = local.create_network ? 1 : 0
  project = var.project
  region  = var.region
  name    = local.name
  network = google_compute_network.gateway[0].id
}

resource "google_compute_router_nat" "gateway" {
  count                              = local.create_network ? 1 : 0
  project                            = var.project
  region                             = var.region
  name                               = local.name
  router                             = google_compute_router.gateway[0].name
  nat_ip_allocate_option             = "AUTO_ONLY"
  source_subnetwork_ip_ranges_to_nat = "LIST_OF_SUBNETWORKS"

  subnetwork {
    name                    = google_compute_subnetwork.gateway[0].id
    source_ip_ranges_to_nat = ["ALL_IP_RANGES"]
  }

  log_config {
    enable = true
    filter = "ERRORS_ONLY"
  }
}

# Clients: the passthrough load balancer delivers packets with the client's
# address and the original destination port, 443 (the VMs redirect it to
# the gateway's port 8443); 8443 is also open to these ranges for clients
# inside the VPC that reach a VM directly.
resource "google_compute_firewall" "clients" {
  project       = var.project
  name          = "${local.name}-clients"
  description   = "Gateway ${var.gateway_id}: API, dashboards and Dask traffic from the allowed ranges."
  network       = local.network_self_link
  direction     = "INGRESS"
  source_ranges = var.allowed_cidrs
  target_tags   = [local.network_tag]

  allow {
    protocol = "tcp"
    ports    = ["443", "8443"]
  }
}

resource "google_compute_firewall" "health_checks" {
  project       = var.project
  name          = "${local.name}-health-checks"
  description   = "Gateway ${var.gateway_id}: Google's load balancer and autohealing health checks."
  network       = local.network_self_link
  direction     = "INGRESS"
  source_ranges = local.health_check_ranges
  target_tags   = [local.network_tag]

  allow {
    protocol = "tcp"
    ports    = ["8443"]
  }
}

resource "google_compute_firewall" "iap_ssh" {
  count         = var.enable_iap_ssh ? 1 : 0
  project       = var.project
  name          = "${local.name}-iap-ssh"
  description   = "Gateway ${var.gateway_id}: SSH through Identity-Aware Proxy, for debugging."
  network       = local.network_self_link
  direction     = "INGRESS"
  source_ranges = ["35.235.240.0/20"]
  target_tags   = [local.network_tag]

  allow {
    protocol = "tcp"
    ports    = ["22"]
  }
}

# The Dask members' firewall rules are not here: the gateway creates two per
# cluster (schedulers' ports from the gateway's service account only, and
# traffic within the cluster by its network tag) and deletes them with the
# cluster. No address range is admitted: members share this subnetwork.

# Dask members have no external address either. With a network this module
# creates, Cloud NAT gives them a route to the public registry of their
# image (ghcr.io/dask/dask by default). An existing network needs, in
# var.region, either Cloud NAT (or another route to the internet), or
# Private Google Access on the subnetwork with the image mirrored into
# Artifact Registry (var.member_container_image = "REGION-docker.pkg.dev/...").
# Without either, every member fails its pull; the gateway then says so
# once, in its log and in the member's reason. Plan warns of what it can see.
check "existing_network_member_image_route" {
  assert {
    condition     = alltrue(data.google_compute_subnetwork.existing[*].private_ip_google_access)
    error_message = "Subnetwork ${coalesce(var.subnetwork, "-")} has Private Google Access off: the gateway's VMs and Dask members (no external addresses) cannot reach Secret Manager, Artifact Registry or Compute Engine. Turn it on."
  }
  assert {
    condition     = local.create_network || can(regex("^[a-z0-9-]+-docker\\.pkg\\.dev/", coalesce(var.member_container_image, "ghcr.io/dask/dask:latest")))
    error_message = "With an existing network, Dask members pull ${coalesce(var.member_container_image, "ghcr.io/dask/dask:latest")} without an external address: give ${var.region} Cloud NAT (or another route to the internet), or mirror the image into Artifact Registry and set member_container_image to it (Private Google Access reaches it). Ignore this warning if the network already has Cloud NAT."
  }
}
