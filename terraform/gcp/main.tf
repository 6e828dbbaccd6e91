# The gateway on Google Cloud: a regional managed instance group of
# Container-Optimized OS VMs running the gateway's container, behind a
# regional external passthrough Network Load Balancer (TCP 443), with its
# state in Cloud SQL for PostgreSQL and its secrets in Secret Manager.
#
# Why not Cloud Run: Cloud Run terminates TLS itself and speaks only
# HTTP(S) and gRPC to the container. The gateway's single port carries, besides
# its HTTPS API, each Dask client's own TLS connection, which the gateway
# routes by its server name (SNI, daskgateway-<cluster>) to the cluster's
# scheduler without decrypting it: mutual TLS is end to end between the
# client and the scheduler. That cannot pass through a proxy that terminates
# TLS. A passthrough Network Load Balancer forwards the client's TCP
# connection untouched (client address included), so the gateway terminates
# its own API TLS and splices Dask's TLS through by SNI.
#
# Files: network.tf (VPC, firewall), database.tf (Cloud SQL), secrets.tf,
# registry.tf (Artifact Registry), iam.tf (service accounts, custom role),
# compute.tf (instance template, MIG, health check, load balancer),
# startup.sh.tftpl (the VMs' startup script).

locals {
  # Names of the module's resources. They start with "gateway-", never with
  # "gw-", which the gateway uses for the per-cluster instances, firewall
  # rules and secrets it creates.
  name = "gateway-${var.gateway_id}"
  # Names with tighter limits (instance template prefix, base instance
  # name): at most 28 characters, still unique per gateway_id.
  short_name = length(var.gateway_id) <= 20 ? local.name : "gateway-${substr(var.gateway_id, 0, 15)}-${substr(sha1(var.gateway_id), 0, 4)}"
  # Service account IDs: 6-30 characters.
  sa_prefix = length(var.gateway_id) <= 18 ? "gw-${var.gateway_id}" : "gw-${substr(var.gateway_id, 0, 13)}-${substr(sha1(var.gateway_id), 0, 4)}"

  # Network tag of the gateway's VMs (firewall rules target it).
  network_tag = local.name

  # Labels of the module's resources. Not gateway-id: the gateway's reaper
  # stops instances carrying its gateway-id label that no cluster owns.
  labels = merge(var.labels, {
    "app"        = "gateway"
    "deployment" = var.gateway_id
    "managed-by" = "terraform"
  })

  zones = var.zones != null ? var.zones : data.google_compute_zones.available[0].names

  # Where the gateway keeps its data on the VM (mounted into the container
  # at the same path).
  data_dir = "/var/lib/gateway"

  # The gateway's URL: the DNS name when there is one, else the load
  # balancer's address.
  public_host = var.public_hostname != null ? var.public_hostname : google_compute_address.gateway.address
  public_url  = "https://${local.public_host}"

  # Everything the gateway is configured with, as GATEWAY_* environment
  # variables of its container (lists comma-separated). None of these is a
  # secret: they are in the instance metadata, readable by anyone with
  # compute.instances.get. Secrets are read at boot by the startup script
  # (startup.sh.tftpl) from Secret Manager. Unset (null or empty) values are
  # left out, so the gateway's defaults apply.
  settings_all = {
    "GATEWAY_PROVIDER"   = "gce"
    "GATEWAY_LISTEN"     = ":8443"
    "GATEWAY_PUBLIC_URL" = local.public_url
    "GATEWAY_GATEWAY_ID" = var.gateway_id
    "GATEWAY_DATA_DIR"   = local.data_dir
    "GATEWAY_LOG_FORMAT" = "json"
    "GATEWAY_LOG_LEVEL"  = var.log_level
    # With replicas, a gateway that stops (rolling update, autohealing,
    # scale-in) hands its clusters to the other replicas instead of
    # stopping them.
    "GATEWAY_CLUSTER_ON_SHUTDOWN" = "leave"
    # The managed database's URL has no password: the gateway puts the one
    # from GATEWAY_DATABASE_PASSWORD (read from Secret Manager) into it. An
    # external database's whole URL comes from its secret instead.
    "GATEWAY_DATABASE_URL"                  = local.managed_database ? local.database_url : null
    "GATEWAY_DATABASE_MAX_CONNECTIONS"      = tostring(var.database_max_connections)
    "GATEWAY_TLS_CLUSTER_DOMAIN"            = var.tls_cluster_domain
    "GATEWAY_AUTH_OIDC_ISSUER"              = var.oidc_issuer
    "GATEWAY_AUTH_OIDC_CLIENT_ID"           = var.oidc_client_id
    "GATEWAY_AUTH_OIDC_AUDIENCE"            = var.oidc_audience
    "GATEWAY_AUTH_OIDC_GROUPS_CLAIM"        = var.oidc_groups_claim
    "GATEWAY_AUTH_ADMIN_GROUPS"             = join(",", var.admin_groups)
    "GATEWAY_AUTH_ADMIN_USERS"              = join(",", var.admin_users)
    "GATEWAY_PROVIDERS_GCE_PROJECT"         = var.project
    "GATEWAY_PROVIDERS_GCE_ZONES"           = join(",", local.zones)
    "GATEWAY_PROVIDERS_GCE_NETWORK"         = local.network_name
    "GATEWAY_PROVIDERS_GCE_SUBNETWORK"      = local.subnetwork_name
    "GATEWAY_PROVIDERS_GCE_SERVICE_ACCOUNT" = google_service_account.members.email
    # Members admit the gateway by the service account its VMs run as, not
    # by an address range: other clusters' members share this subnetwork.
    "GATEWAY_PROVIDERS_GCE_GATEWAY_SERVICE_ACCOUNT" = google_service_account.gateway.email
    "GATEWAY_PROVIDERS_GCE_CONTAINER_IMAGE"         = var.member_container_image
    "GATEWAY_PROVIDERS_GCE_DISK_GIB"                = var.member_disk_gib == null ? null : tostring(var.member_disk_gib)
    # Environment images: built without a Docker engine (the gateway's
    # container has no Docker socket), from a base in the bases repository
    # plus one layer per wheel from the package index, and pushed to
    # Artifact Registry with the VM's service account. The wheel cache is on
    # the boot disk, lost when the VM is replaced. With pip_index_url_secret
    # the index's URL comes from Secret Manager (startup.sh.tftpl).
    "GATEWAY_IMAGES_REPOSITORY"      = local.environments_repository
    "GATEWAY_IMAGES_AUTH"            = "google"
    "GATEWAY_IMAGES_BUILDER"         = "layers"
    "GATEWAY_IMAGES_BASES"           = jsonencode(local.image_bases)
    "GATEWAY_IMAGES_PIP_INDEX_URL"   = var.pip_index_url_secret ? null : var.pip_index_url
    "GATEWAY_IMAGES_WHEEL_CACHE_DIR" = "${local.data_dir}/wheels"
    "GATEWAY_IMAGES_WHEEL_CACHE_MIB" = tostring(var.wheel_cache_mib)
    "GATEWAY_CLUSTER_MAX_WORKERS"    = var.cluster_max_workers == null ? null : tostring(var.cluster_max_workers)
    "GATEWAY_CLUSTER_IDLE_TIMEOUT"   = var.cluster_idle_timeout
    "GATEWAY_CLUSTER_MAX_LIFETIME"   = var.cluster_max_lifetime
    "GATEWAY_QUOTAS_ON_EXCEED"       = var.quotas_on_exceed
  }
  settings = { for k, v in local.settings_all : k => v if v != null && v != "" }
}

data "google_compute_zones" "available" {
  count   = var.zones == null ? 1 : 0
  project = var.project
  region  = var.region
  status  = "UP"
}
