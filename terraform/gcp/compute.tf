# Where the gateway runs: a regional managed instance group of
# Container-Optimized OS VMs, each running the gateway's container on the
# host network, behind a regional external passthrough Network Load
# Balancer on TCP 443.
#
# Why not Cloud Run (see also main.tf): Cloud Run terminates TLS and speaks
# HTTP(S)/gRPC only, so the raw TLS of Dask clients, which the gateway routes
# by SNI to the schedulers without decrypting it, cannot reach the gateway
# there. The passthrough load balancer forwards TCP untouched: the gateway
# terminates its own API TLS and passes Dask's TLS through.
#
# A passthrough load balancer does not translate ports: packets reach the VMs
# addressed to the load balancer's IP and port 443. The startup script
# redirects 443 to the gateway's port 8443 on each VM; health checks probe
# 8443 directly.

resource "google_compute_address" "gateway" {
  project      = var.project
  region       = var.region
  name         = "${local.name}-lb"
  description  = "Gateway ${var.gateway_id}: the load balancer's address."
  address_type = "EXTERNAL"
  network_tier = "PREMIUM"
}

# One health check for the load balancer and for autohealing: the gateway's
# unauthenticated health endpoint over HTTPS on its own port (the probes do
# not verify the certificate, so the self-signed one of a gateway without a
# TLS secret version passes too).
resource "google_compute_region_health_check" "gateway" {
  project             = var.project
  region              = var.region
  name                = "${local.name}-health"
  description         = "Gateway ${var.gateway_id}: GET /api/health on 8443."
  check_interval_sec  = 10
  timeout_sec         = 5
  healthy_threshold   = 2
  unhealthy_threshold = 3

  https_health_check {
    port         = 8443
    request_path = "/api/health"
  }
}

resource "google_compute_instance_template" "gateway" {
  project      = var.project
  name_prefix  = "${local.short_name}-"
  description  = "Gateway ${var.gateway_id}: Container-Optimized OS running ${var.gateway_image}."
  machine_type = var.machine_type
  tags         = [local.network_tag]
  labels       = local.labels

  disk {
    boot         = true
    auto_delete  = true
    source_image = "projects/cos-cloud/global/images/family/cos-stable"
    disk_size_gb = var.boot_disk_gib
    disk_type    = "pd-balanced"
    labels       = local.labels
  }

  # No external address: Private Google Access and Cloud NAT.
  network_interface {
    subnetwork         = local.subnetwork_self_link
    subnetwork_project = var.project
  }

  service_account {
    email = google_service_account.gateway.email
    # What the account may do is decided by its IAM roles; the gateway's
    # client libraries and Secret Manager need this scope.
    scopes = ["https://www.googleapis.com/auth/cloud-platform"]
  }

  shielded_instance_config {
    enable_secure_boot          = true
    enable_vtpm                 = true
    enable_integrity_monitoring = true
  }

  scheduling {
    automatic_restart   = true
    on_host_maintenance = "MIGRATE"
  }

  metadata = {
    # Nothing secret: the script reads the secrets from Secret Manager.
    "startup-script" = templatefile("${path.module}/startup.sh.tftpl", {
      image                    = var.gateway_image
      container_user           = var.gateway_container_user
      data_dir                 = local.data_dir
      settings                 = local.settings
      tls_secret               = local.tls_secret_path
      database_password_secret = local.database_password_secret_path
      database_url_secret      = local.database_url_secret_path
      oidc_client_secret       = local.oidc_client_secret_path
      pip_index_url_secret     = local.pip_index_url_secret_path
    })
    # Container-Optimized OS ships the container's logs to Cloud Logging and
    # the VM's metrics to Cloud Monitoring.
    "google-logging-enabled"    = "true"
    "google-monitoring-enabled" = "true"
    "enable-oslogin"            = "TRUE"
    "block-project-ssh-keys"    = "TRUE"
  }

  lifecycle {
    create_before_destroy = true

    precondition {
      condition     = alltrue([for v in values(local.settings) : !strcontains(v, "\n") && !strcontains(v, "\r")])
      error_message = "A gateway setting contains a line break; settings are passed one per line in the container's environment file."
    }

    # The wheel cache, the layers made from it (bounded alike) and the
    # scratch space of builds share the boot disk with the system and images.
    precondition {
      condition     = 2 * var.wheel_cache_mib + 6144 <= var.boot_disk_gib * 1024
      error_message = "wheel_cache_mib = ${var.wheel_cache_mib} does not fit on boot_disk_gib = ${var.boot_disk_gib}: twice the cache plus 6144 MiB must fit, so lower wheel_cache_mib to ${floor((var.boot_disk_gib * 1024 - 6144) / 2)} or raise boot_disk_gib to ${ceil((2 * var.wheel_cache_mib + 6144) / 1024)}."
    }

    precondition {
      condition     = !(var.pip_index_url_secret && var.pip_index_url != null)
      error_message = "Set pip_index_url or pip_index_url_secret, not both: with pip_index_url_secret the URL is the secret's version."
    }
  }
}

resource "google_compute_region_instance_group_manager" "gateway" {
  project                   = var.project
  region                    = var.region
  name                      = local.name
  description               = "Gateway ${var.gateway_id}: its replicas."
  base_instance_name        = local.short_name
  distribution_policy_zones = local.zones
  target_size               = var.replicas
  wait_for_instances        = false

  version {
    name              = "gateway"
    instance_template = google_compute_instance_template.gateway.self_link_unique
  }

  # A VM whose gateway does not answer its health check for 30 s is
  # recreated (after 5 minutes for the first boot: image pull, secrets).
  auto_healing_policies {
    health_check      = google_compute_region_health_check.gateway.id
    initial_delay_sec = 300
  }

  # A new template (new image, settings) replaces the VMs, new ones first:
  # max_surge_fixed must be 0 or at least the number of zones in a regional
  # group.
  update_policy {
    type                         = "PROACTIVE"
    minimal_action               = "REPLACE"
    instance_redistribution_type = "PROACTIVE"
    max_surge_fixed              = length(local.zones)
    max_unavailable_fixed        = 0
    replacement_method           = "SUBSTITUTE"
  }

  # The VMs read these at boot: the database password and its secret, the
  # secrets' access bindings, the image repository's, the custom role.
  depends_on = [
    google_sql_user.gateway,
    google_sql_database.gateway,
    google_secret_manager_secret_version.database_password,
    google_secret_manager_secret_iam_member.gateway,
    google_artifact_registry_repository_iam_member.gateway_image,
    google_artifact_registry_repository_iam_member.gateway_environments,
    google_project_iam_member.gateway_role,
    google_project_iam_member.gateway_telemetry,
    google_service_account_iam_member.gateway_acts_as_members,
    google_compute_router_nat.gateway,
  ]
}

# The external passthrough Network Load Balancer: a regional backend service
# (EXTERNAL, TCP) with the instance group as its backend, and a forwarding
# rule on TCP 443.
resource "google_compute_region_backend_service" "gateway" {
  project               = var.project
  region                = var.region
  name                  = local.name
  description           = "Gateway ${var.gateway_id}: passthrough to the replicas."
  protocol              = "TCP"
  load_balancing_scheme = "EXTERNAL"
  health_checks         = [google_compute_region_health_check.gateway.id]
  # A client keeps reaching the same replica while the set of healthy
  # replicas does not change: one-time dashboard links are redeemed on the
  # replica that made them (browser sessions are shared through the
  # database).
  session_affinity                = "CLIENT_IP"
  connection_draining_timeout_sec = 300

  backend {
    group          = google_compute_region_instance_group_manager.gateway.instance_group
    balancing_mode = "CONNECTION"
    description    = "The gateway's managed instance group."
  }
}

resource "google_compute_forwarding_rule" "gateway" {
  project               = var.project
  region                = var.region
  name                  = local.name
  description           = "Gateway ${var.gateway_id}: TCP 443 to the replicas, client addresses kept."
  load_balancing_scheme = "EXTERNAL"
  ip_protocol           = "TCP"
  ip_address            = google_compute_address.gateway.address
  port_range            = "443"
  network_tier          = "PREMIUM"
  backend_service       = google_compute_region_backend_service.gateway.id
}
