# Inputs of the gateway module for Google Cloud. Nothing here is a secret:
# secret values are generated (the database password, as an ephemeral value
# that never reaches the state) or added by the operator to Secret Manager
# after apply (the TLS certificate, the OIDC client secret).

# ---- where ----------------------------------------------------------------

variable "project" {
  type        = string
  description = "ID of the Google Cloud project the gateway and its Dask clusters run in (e.g. my-project-123)."

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project))
    error_message = "project must be a project ID (6-30 lower-case letters, digits and hyphens, starting with a letter), not a project name or number."
  }
}

variable "region" {
  type        = string
  description = "Region of the gateway's VMs, load balancer, database, subnetwork and image repository; the Dask clusters run in its zones."

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Compute Engine region name such as us-central1 or europe-west4."
  }
}

variable "zones" {
  type        = list(string)
  description = "Zones of var.region, in order, that the gateway's VMs are spread over and that Dask cluster members are tried in. null: every zone of the region that is up."
  default     = null

  validation {
    condition = var.zones == null || try(
      length(var.zones) > 0 &&
      length(distinct(var.zones)) == length(var.zones) &&
      alltrue([for z in var.zones : can(regex("^${var.region}-[a-z]$", z))]),
      false
    )
    error_message = "zones must be null or a non-empty list of distinct zones of var.region, such as [\"us-central1-a\", \"us-central1-b\"]."
  }
}

variable "gateway_id" {
  type        = string
  description = "Ownership tag of this gateway: Dask cluster resources carry it as their gateway-id label, and the module's own resources are named gateway-<gateway_id>-*. Keep it stable for the life of the deployment; use one per gateway in a project."
  default     = "main"

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$", var.gateway_id))
    error_message = "gateway_id must be 1-32 lower-case letters, digits and hyphens, not starting or ending with a hyphen (e.g. main, team-a)."
  }
}

variable "labels" {
  type        = map(string)
  description = "Labels added to the module's resources that take labels (VMs, database, secrets, repository)."
  default     = {}

  validation {
    condition = alltrue([
      for k, v in var.labels :
      can(regex("^[a-z][a-z0-9_-]{0,62}$", k)) && can(regex("^[a-z0-9_-]{0,63}$", v)) && !startswith(k, "gateway-")
    ])
    error_message = "labels keys must be lower-case letters, digits, _ and - (starting with a letter, at most 63 characters), values the same without the first-letter rule, and keys must not start with \"gateway-\" (the gateway's own ownership labels, which the gateway's reaper acts on)."
  }
}

# ---- the gateway's VMs ---------------------------------------------------

variable "gateway_image" {
  type        = string
  description = "Container image of the gateway with an explicit tag or digest, e.g. us-central1-docker.pkg.dev/my-project/gateway/gateway:v1.2.3. Its entrypoint must be the gateway binary (the VMs run `<image> serve`). When it is in Artifact Registry, the gateway's service account is granted roles/artifactregistry.reader on that repository."

  validation {
    condition     = can(regex("^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[a-f0-9]{64})$", var.gateway_image))
    error_message = "gateway_image must be a full image reference with a registry host and an explicit tag or digest, e.g. us-central1-docker.pkg.dev/my-project/gateway/gateway:v1.2.3."
  }
}

variable "gateway_container_user" {
  type        = string
  description = "UID:GID the gateway's container runs as (docker run --user); the data directory on the VM is made theirs. The default is the usual non-root user of distroless images."
  default     = "65532:65532"

  validation {
    condition     = can(regex("^[0-9]{1,10}:[0-9]{1,10}$", var.gateway_container_user))
    error_message = "gateway_container_user must be a numeric UID:GID such as 65532:65532 (the VM has no user names for the image's users)."
  }
}

variable "replicas" {
  type        = number
  description = "Number of gateway VMs. They share the PostgreSQL database; any replica serves any cluster."
  default     = 2

  validation {
    condition     = var.replicas >= 1 && var.replicas <= 10 && floor(var.replicas) == var.replicas
    error_message = "replicas must be a whole number from 1 to 10."
  }
}

variable "machine_type" {
  type        = string
  description = "Machine type of the gateway's VMs. They proxy every Dask client's traffic to the schedulers, so give them network bandwidth (more vCPUs) for large clusters."
  default     = "e2-standard-2"

  validation {
    condition     = can(regex("^[a-z][a-z0-9]*-[a-z0-9-]+$", var.machine_type))
    error_message = "machine_type must be a Compute Engine machine type name such as e2-standard-2."
  }
}

variable "boot_disk_gib" {
  type        = number
  description = "Boot disk size of the gateway's VMs, GiB (the gateway's image and its data directory: logs, build logs, the wheel cache and the layers made from it; twice wheel_cache_mib plus 6 GiB must fit)."
  default     = 20

  validation {
    condition     = var.boot_disk_gib >= 10 && var.boot_disk_gib <= 1000 && floor(var.boot_disk_gib) == var.boot_disk_gib
    error_message = "boot_disk_gib must be a whole number from 10 to 1000."
  }
}

variable "log_level" {
  type        = string
  description = "Log level of the gateway: debug, info, warn or error. Logs are JSON on the container's stderr, shipped to Cloud Logging."
  default     = "info"

  validation {
    condition     = contains(["debug", "info", "warn", "error"], var.log_level)
    error_message = "log_level must be debug, info, warn or error."
  }
}

# ---- network ---------------------------------------------------------------

variable "network" {
  type        = string
  description = "Name of an existing VPC network in var.project to run in. null: the module creates a custom-mode network with one subnetwork, Private Google Access, a Cloud Router and Cloud NAT. An existing network's subnetwork needs Private Google Access and Cloud NAT (or another route to the internet) itself: the VMs have no external addresses and must reach your OIDC issuer and, by default, ghcr.io."
  default     = null

  validation {
    condition     = var.network == null || can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", var.network))
    error_message = "network must be null or the name of a VPC network (not a URL)."
  }
}

variable "subnetwork" {
  type        = string
  description = "Name of the subnetwork of var.network, in var.region, for the gateway's VMs and the Dask clusters. Required with var.network; must be null without it."
  default     = null

  validation {
    condition     = (var.network == null) == (var.subnetwork == null)
    error_message = "subnetwork must be set exactly when network is set: name the subnetwork (in var.region) of your network, or leave both null to let the module create them."
  }

  validation {
    condition     = var.subnetwork == null || can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", var.subnetwork))
    error_message = "subnetwork must be the name of a subnetwork (not a URL)."
  }
}

variable "subnetwork_cidr" {
  type        = string
  description = "IPv4 range of the subnetwork the module creates when var.network is null (gateway VMs and every Dask scheduler and worker get an address from it)."
  default     = "10.10.0.0/20"

  validation {
    condition = can(regex("^([0-9]{1,3}\\.){3}[0-9]{1,3}/[0-9]{1,2}$", var.subnetwork_cidr)) && try(
      cidrsubnet(var.subnetwork_cidr, 0, 0) == var.subnetwork_cidr &&
      tonumber(split("/", var.subnetwork_cidr)[1]) >= 8 &&
      tonumber(split("/", var.subnetwork_cidr)[1]) <= 29,
      false
    )
    error_message = "subnetwork_cidr must be an IPv4 CIDR range between /8 and /29 with no host bits set, e.g. 10.10.0.0/20."
  }
}

variable "create_private_services_access" {
  type        = bool
  description = "Reserve a range and create the private services access connection (VPC peering with servicenetworking.googleapis.com) that the Cloud SQL private IP needs. Set false when var.network already has one: a network has one such connection, and creating another would replace its ranges. Ignored with var.database_url_secret."
  default     = true
}

variable "private_services_prefix_length" {
  type        = number
  description = "Prefix length of the range reserved for private services access (Cloud SQL's private IP comes from it)."
  default     = 20

  validation {
    condition     = var.private_services_prefix_length >= 8 && var.private_services_prefix_length <= 24 && floor(var.private_services_prefix_length) == var.private_services_prefix_length
    error_message = "private_services_prefix_length must be a whole number from 8 to 24 (Cloud SQL needs at least a /24)."
  }
}

variable "allowed_cidrs" {
  type        = list(string)
  description = "IPv4 ranges allowed to reach the gateway (API, dashboards and Dask traffic) through the load balancer: your users' and notebooks' addresses. The passthrough load balancer keeps client addresses, so this firewall rule sees them. [\"0.0.0.0/0\"] opens the gateway to the internet (it still requires an OIDC login or API token)."

  validation {
    condition = length(var.allowed_cidrs) > 0 && alltrue([
      for c in var.allowed_cidrs :
      can(regex("^([0-9]{1,3}\\.){3}[0-9]{1,3}/[0-9]{1,2}$", c)) && try(cidrsubnet(c, 0, 0) == c, false)
    ])
    error_message = "allowed_cidrs must be a non-empty list of IPv4 CIDR ranges with no host bits set, e.g. [\"203.0.113.0/24\", \"198.51.100.7/32\"]."
  }
}

variable "enable_iap_ssh" {
  type        = bool
  description = "Allow SSH to the gateway's VMs from Identity-Aware Proxy's range (35.235.240.0/20) only, for `gcloud compute ssh --tunnel-through-iap` when debugging the startup script."
  default     = false
}

# ---- identity and TLS ------------------------------------------------------

variable "public_hostname" {
  type        = string
  description = "DNS name users reach the gateway at (e.g. dask.example.com); the TLS certificate must be for it, and its DNS record must point at the gateway_ip output. null: the gateway's URL is https://<load balancer IP> (fine for a first test with the gateway's self-signed certificate)."
  default     = null

  validation {
    condition     = var.public_hostname == null || can(regex("^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$", var.public_hostname))
    error_message = "public_hostname must be a lower-case DNS name such as dask.example.com (no scheme, port or path)."
  }
}

variable "tls_cluster_domain" {
  type        = string
  description = "Optional domain under which the gateway also routes TLS server names <cluster>.<domain> to schedulers (tls.cluster_domain). null: only daskgateway-<cluster> server names."
  default     = null

  validation {
    condition     = var.tls_cluster_domain == null || can(regex("^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$", var.tls_cluster_domain))
    error_message = "tls_cluster_domain must be null or a lower-case DNS domain such as clusters.dask.example.com."
  }
}

variable "oidc_issuer" {
  type        = string
  description = "OpenID Connect issuer URL users log in with, exactly as it appears in the tokens' iss claim (the gateway discovers it through /.well-known/openid-configuration), e.g. https://login.example.com/realms/main."

  validation {
    condition     = can(regex("^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[^\\s?#]*)?$", var.oidc_issuer))
    error_message = "oidc_issuer must be an https:// URL with no query or fragment, e.g. https://accounts.example.com or https://login.example.com/realms/main."
  }
}

variable "oidc_client_id" {
  type        = string
  description = "Client ID of the public OIDC client that `gateway login` (device flow or browser) and the dashboards' browser sign-in use; ID tokens must carry it as their audience unless var.oidc_audience says otherwise."

  validation {
    condition     = can(regex("^[^\\s,]{1,255}$", var.oidc_client_id))
    error_message = "oidc_client_id must be 1-255 characters without spaces or commas."
  }
}

variable "oidc_audience" {
  type        = string
  description = "The aud ID tokens must carry, when it is not the client ID. null: the client ID."
  default     = null

  validation {
    condition     = var.oidc_audience == null || can(regex("^[^\\s,]{1,255}$", var.oidc_audience))
    error_message = "oidc_audience must be null or 1-255 characters without spaces or commas."
  }
}

variable "oidc_groups_claim" {
  type        = string
  description = "Claim of the ID token holding the user's groups. null: the gateway's default (groups)."
  default     = null

  validation {
    condition     = var.oidc_groups_claim == null || can(regex("^[A-Za-z0-9_:./-]{1,128}$", var.oidc_groups_claim))
    error_message = "oidc_groups_claim must be null or a claim name (letters, digits, _ : . / -)."
  }
}

variable "oidc_client_secret_required" {
  type        = bool
  description = "Create a Secret Manager secret (without a version) for an OIDC client secret, for identity providers that require one for the browser sign-in; add its value after apply (see the oidc_client_secret_id output). Until it has a version the gateway starts without one."
  default     = false
}

variable "admin_groups" {
  type        = list(string)
  description = "Groups (from the groups claim) whose members are gateway admins (quotas, everyone's clusters, usage, audit)."
  default     = []

  validation {
    condition     = alltrue([for g in var.admin_groups : length(g) > 0 && !strcontains(g, ",") && !strcontains(g, "\n")])
    error_message = "admin_groups entries must be non-empty and contain no commas or newlines (the list is passed comma-separated)."
  }
}

variable "admin_users" {
  type        = list(string)
  description = "User names or ids (as `gateway whoami` shows them) who are gateway admins."
  default     = []

  validation {
    condition     = alltrue([for u in var.admin_users : length(u) > 0 && !strcontains(u, ",") && !strcontains(u, "\n")])
    error_message = "admin_users entries must be non-empty and contain no commas or newlines (the list is passed comma-separated)."
  }
}

# ---- database --------------------------------------------------------------

variable "database_url_secret" {
  type        = string
  description = "Use an external PostgreSQL instead of creating Cloud SQL: the ID of an existing Secret Manager secret whose latest version is the full URL, postgres://user:password@host:5432/db?sslmode=require (a secret ID in var.project, or projects/<project>/secrets/<id>). The gateway's service account is granted access to that secret alone. null: the module creates a Cloud SQL PostgreSQL instance with a private IP."
  default     = null

  validation {
    condition     = var.database_url_secret == null || can(regex("^(projects/[a-z0-9-]+/secrets/)?[A-Za-z0-9_-]{1,255}$", var.database_url_secret))
    error_message = "database_url_secret must be null, a secret ID (letters, digits, _ and -), or projects/<project>/secrets/<id>."
  }
}

variable "database_version" {
  type        = string
  description = "Cloud SQL PostgreSQL version of the database the module creates."
  default     = "POSTGRES_16"

  validation {
    condition     = can(regex("^POSTGRES_[0-9]{2}$", var.database_version)) && try(tonumber(trimprefix(var.database_version, "POSTGRES_")) >= 14, false)
    error_message = "database_version must be a Cloud SQL PostgreSQL version from POSTGRES_14 on, e.g. POSTGRES_16."
  }
}

variable "database_tier" {
  type        = string
  description = "Cloud SQL machine tier (Enterprise edition), e.g. db-custom-1-3840 (1 vCPU, 3.75 GiB) or db-custom-2-7680."
  default     = "db-custom-1-3840"

  validation {
    condition     = can(regex("^db-[a-z0-9-]+$", var.database_tier)) && !startswith(var.database_tier, "db-perf-optimized")
    error_message = "database_tier must be a Cloud SQL Enterprise edition tier such as db-custom-1-3840 or db-g1-small (Enterprise Plus db-perf-optimized-* tiers are not used by this module)."
  }
}

variable "database_availability_type" {
  type        = string
  description = "ZONAL (one zone) or REGIONAL (a standby in another zone with automatic failover, twice the price) Cloud SQL instance."
  default     = "ZONAL"

  validation {
    condition     = contains(["ZONAL", "REGIONAL"], var.database_availability_type)
    error_message = "database_availability_type must be ZONAL or REGIONAL."
  }
}

variable "database_deletion_protection" {
  type        = bool
  description = "Protect the Cloud SQL instance from deletion (by Terraform and in the API). Set false and apply before `terraform destroy`."
  default     = true
}

variable "database_password_version" {
  type        = number
  description = "Version of the generated database password: the password is written (write-only, never stored in the state) when the user and its secret are created and whenever this number changes. Increase it to rotate the password, then replace the gateway's VMs."
  default     = 1

  validation {
    condition     = var.database_password_version >= 1 && floor(var.database_password_version) == var.database_password_version
    error_message = "database_password_version must be a whole number of at least 1; increase it to rotate the password."
  }
}

variable "database_max_connections" {
  type        = number
  description = "Most PostgreSQL connections each gateway replica opens (database.max_connections); replicas add up against the server's limit (about 100 for the smallest tiers)."
  default     = 20

  validation {
    condition     = var.database_max_connections >= 1 && var.database_max_connections <= 1000 && floor(var.database_max_connections) == var.database_max_connections
    error_message = "database_max_connections must be a whole number from 1 to 1000."
  }
}

# ---- Dask clusters ------------------------------------------------------

variable "member_container_image" {
  type        = string
  description = "Container image Dask schedulers and workers run when a cluster names none and builds none (providers.gce.container_image). null: the gateway's default, ghcr.io/dask/dask:latest (pulled through Cloud NAT); pin a version in production."
  default     = null

  validation {
    condition     = var.member_container_image == null || can(regex("^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[a-f0-9]{64})?$", var.member_container_image))
    error_message = "member_container_image must be null or an image reference with a registry host, e.g. ghcr.io/dask/dask:2024.12.1."
  }
}

variable "member_disk_gib" {
  type        = number
  description = "Boot disk of each Dask scheduler and worker VM, GiB (providers.gce.disk_gib). null: the gateway's default (50)."
  default     = null

  validation {
    condition     = var.member_disk_gib == null || try(var.member_disk_gib >= 10 && floor(var.member_disk_gib) == var.member_disk_gib, false)
    error_message = "member_disk_gib must be null or a whole number of at least 10."
  }
}

variable "cluster_max_workers" {
  type        = number
  description = "Most workers one cluster may have (cluster.max_workers). null: the gateway's default (50)."
  default     = null

  validation {
    condition     = var.cluster_max_workers == null || try(var.cluster_max_workers >= 1 && floor(var.cluster_max_workers) == var.cluster_max_workers, false)
    error_message = "cluster_max_workers must be null or a whole number of at least 1."
  }
}

variable "cluster_idle_timeout" {
  type        = string
  description = "Clusters with no tasks and no client this long are stopped (cluster.idle_timeout, a Go duration such as 20m or 1h30m; 0 never). null: the gateway's default (20m)."
  default     = null

  validation {
    condition     = var.cluster_idle_timeout == null || can(regex("^(0|([0-9]+(h|m|s))+)$", var.cluster_idle_timeout))
    error_message = "cluster_idle_timeout must be null, 0, or a duration made of hours, minutes and seconds such as 20m, 2h or 1h30m."
  }
}

variable "cluster_max_lifetime" {
  type        = string
  description = "Clusters running this long are stopped, busy or not (cluster.max_lifetime, e.g. 24h; 0 never). null: the gateway's default (never)."
  default     = null

  validation {
    condition     = var.cluster_max_lifetime == null || can(regex("^(0|([0-9]+(h|m|s))+)$", var.cluster_max_lifetime))
    error_message = "cluster_max_lifetime must be null, 0, or a duration made of hours, minutes and seconds such as 24h or 8h30m."
  }
}

variable "quotas_on_exceed" {
  type        = string
  description = "What a scale beyond a user's quota does (quotas.on_exceed): clamp (to what fits, with a warning) or refuse. null: the gateway's default (clamp)."
  default     = null

  validation {
    condition     = var.quotas_on_exceed == null || contains(["clamp", "refuse"], coalesce(var.quotas_on_exceed, "-"))
    error_message = "quotas_on_exceed must be null, clamp or refuse."
  }
}

variable "environment_image_max_age_days" {
  type        = number
  description = "Delete environment images older than this many days from the Artifact Registry repository (a cleanup policy; the gateway rebuilds an environment that is asked for again). null: keep them."
  default     = null

  validation {
    condition     = var.environment_image_max_age_days == null || try(var.environment_image_max_age_days >= 1 && floor(var.environment_image_max_age_days) == var.environment_image_max_age_days, false)
    error_message = "environment_image_max_age_days must be null or a whole number of days, at least 1."
  }
}

# ---- environment images (images.*) ------------------------------------------

variable "base_images" {
  type = list(object({
    python   = string
    image    = optional(string)
    gpu      = optional(bool, false)
    platform = optional(string, "linux/amd64")
  }))
  description = "The base images environments are built on (images.bases), one per Python version (and GPU, platform): python is the major.minor version users run (\"3.11\"); image is its reference, or null for the module's bases repository with the tag <python>[-gpu][-arm64] (you push it there after apply: README.md, \"Base images\"). A base has that Python and the Dask and distributed your users run; pip is not needed."
  default     = [{ python = "3.11" }]
  nullable    = false

  validation {
    condition     = length(var.base_images) > 0 && alltrue([for b in var.base_images : can(regex("^3\\.[0-9]{1,2}$", b.python))])
    error_message = "base_images must list at least one base, each with python as a major.minor version in quotes, e.g. [{ python = \"3.11\" }]."
  }

  validation {
    condition     = alltrue([for b in var.base_images : b.image == null || can(regex("^[^\\s]+$", coalesce(b.image, "-")))])
    error_message = "An image of base_images must be null (the module's bases repository) or an image reference without spaces."
  }

  validation {
    condition     = alltrue([for b in var.base_images : contains(["linux/amd64", "linux/arm64"], b.platform)])
    error_message = "The platform of each of base_images must be linux/amd64 or linux/arm64."
  }

  validation {
    condition     = length(distinct([for b in var.base_images : "${b.python}/${b.gpu}/${b.platform}"])) == length(var.base_images)
    error_message = "base_images must not list two bases for the same python, gpu and platform."
  }
}

variable "pip_index_url" {
  type        = string
  description = "Package index the gateway fetches wheels from (images.pip_index_url), PEP 503 simple or PEP 691 JSON, e.g. https://pypi.example.com/simple/. null: the gateway's default (PyPI, through Cloud NAT). An index that needs credentials goes in a secret instead (pip_index_url_secret)."
  default     = null

  validation {
    condition     = var.pip_index_url == null || can(regex("^https?://[^/@\\s]+(/[^\\s]*)?$", coalesce(var.pip_index_url, "-")))
    error_message = "pip_index_url must be null or an http(s) URL without credentials, e.g. https://pypi.example.com/simple/; put a URL with user:password@ in the secret of pip_index_url_secret."
  }
}

variable "pip_index_url_secret" {
  type        = bool
  description = "Create a Secret Manager secret (without a version: you add the URL after apply) holding images.pip_index_url, for an index whose URL carries credentials (https://user:token@pypi.example.com/simple/). It replaces pip_index_url."
  default     = false
  nullable    = false
}

variable "wheel_cache_mib" {
  type        = number
  description = "Largest size of each gateway VM's wheel cache, MiB (images.wheel_cache_mib), kept on its boot disk under /var/lib/gateway/wheels (lost when the VM is replaced). Twice this plus 6 GiB must fit in boot_disk_gib."
  default     = 4096
  nullable    = false

  validation {
    condition     = var.wheel_cache_mib >= 64 && floor(var.wheel_cache_mib) == var.wheel_cache_mib
    error_message = "wheel_cache_mib must be a whole number of MiB, at least 64."
  }
}
