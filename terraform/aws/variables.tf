# Inputs of the gateway module. Every value that can be wrong is validated
# here, before any AWS call; checks that involve two inputs are
# preconditions on the resources that need them.

# ---------------------------------------------------------------------------
# Identity of this deployment
# ---------------------------------------------------------------------------

variable "gateway_id" {
  type        = string
  description = "Ownership tag value the gateway puts on everything it starts (tag gateway-id), and the prefix of this module's resource names. Unique per AWS account."
  default     = "main"
  nullable    = false

  validation {
    condition     = length(var.gateway_id) <= 32 && can(regex("^[a-z0-9]+(-[a-z0-9]+)*$", var.gateway_id))
    error_message = "The gateway_id must be 1 to 32 characters: lowercase letters, digits and '-' (not first, not last, never two in a row), e.g. \"main\" or \"team-a\"."
  }
}

variable "tags" {
  type        = map(string)
  description = "Tags added to every resource this module creates. The gateway's own ownership keys (gateway-id, gateway-cluster, gateway-member, gateway-owner) are refused: the gateway may stop or delete whatever carries them."
  default     = {}
  nullable    = false

  validation {
    condition     = alltrue([for k in keys(var.tags) : !contains(["gateway-id", "gateway-cluster", "gateway-member", "gateway-owner"], k)])
    error_message = "The tags must not use the keys gateway-id, gateway-cluster, gateway-member or gateway-owner: the gateway treats resources carrying them as its clusters' and may delete them."
  }
}

# ---------------------------------------------------------------------------
# The gateway service (ECS on Fargate)
# ---------------------------------------------------------------------------

variable "gateway_image" {
  type        = string
  description = "Container image of the gateway, built from the repository's root Dockerfile (e.g. 123456789012.dkr.ecr.us-east-1.amazonaws.com/gateway:1.0.0). Its default command must run `gateway serve`."
  nullable    = false

  validation {
    condition     = can(regex("^[^\\s]+$", var.gateway_image))
    error_message = "The gateway_image must be a non-empty image reference without spaces, e.g. 123456789012.dkr.ecr.us-east-1.amazonaws.com/gateway:1.0.0."
  }
}

variable "desired_count" {
  type        = number
  description = "Number of gateway replicas (ECS tasks). They share the PostgreSQL database and take over each other's clusters; 2 or more survive a task or zone failure. 0 stops the gateway without deleting anything."
  default     = 2
  nullable    = false

  validation {
    condition     = var.desired_count >= 0 && var.desired_count <= 20 && floor(var.desired_count) == var.desired_count
    error_message = "The desired_count must be a whole number from 0 to 20."
  }
}

variable "gateway_cpu" {
  type        = number
  description = "CPU units of each gateway task (1024 = 1 vCPU); a Fargate size: 256, 512, 1024, 2048, 4096, 8192 or 16384."
  default     = 1024
  nullable    = false

  validation {
    condition     = contains([256, 512, 1024, 2048, 4096, 8192, 16384], var.gateway_cpu)
    error_message = "The gateway_cpu must be one of Fargate's sizes: 256, 512, 1024, 2048, 4096, 8192 or 16384."
  }
}

variable "gateway_memory" {
  type        = number
  description = "Memory of each gateway task, MiB; must be a size Fargate allows with gateway_cpu (e.g. 2048 to 8192 for 1024 CPU units)."
  default     = 2048
  nullable    = false

  validation {
    condition     = var.gateway_memory >= 512 && var.gateway_memory <= 122880 && floor(var.gateway_memory / 512) == var.gateway_memory / 512
    error_message = "The gateway_memory must be a multiple of 512 MiB from 512 to 122880 (and a size Fargate allows with gateway_cpu)."
  }
}

variable "gateway_cpu_architecture" {
  type        = string
  description = "CPU architecture the gateway image was built for: X86_64 (docker build --platform linux/amd64) or ARM64 (linux/arm64, Graviton)."
  default     = "X86_64"
  nullable    = false

  validation {
    condition     = contains(["X86_64", "ARM64"], var.gateway_cpu_architecture)
    error_message = "The gateway_cpu_architecture must be X86_64 or ARM64."
  }
}

variable "log_level" {
  type        = string
  description = "Gateway log level: debug, info, warn or error."
  default     = "info"
  nullable    = false

  validation {
    condition     = contains(["debug", "info", "warn", "error"], var.log_level)
    error_message = "The log_level must be debug, info, warn or error."
  }
}

variable "log_retention_days" {
  type        = number
  description = "Days CloudWatch Logs keeps the gateway's (and the Fargate Dask tasks') logs; 0 keeps them forever."
  default     = 30
  nullable    = false

  validation {
    condition     = contains([0, 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "The log_retention_days must be a value CloudWatch Logs accepts: 0 (forever), 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653."
  }
}

# ---------------------------------------------------------------------------
# Network
# ---------------------------------------------------------------------------

variable "vpc_id" {
  type        = string
  description = "Existing VPC to deploy into (with private_subnet_ids, and public_subnet_ids for an internet-facing load balancer). null creates a VPC with public and private subnets and NAT."
  default     = null

  validation {
    condition     = var.vpc_id == null || can(regex("^vpc-[0-9a-f]{8}([0-9a-f]{9})?$", var.vpc_id))
    error_message = "The vpc_id must be null (create a VPC) or a VPC id such as vpc-0123456789abcdef0."
  }
}

variable "private_subnet_ids" {
  type        = list(string)
  description = "With vpc_id: private subnets (with outbound access through NAT or VPC endpoints), in 2 or more Availability Zones, for the gateway tasks, the database and the Dask members. Empty when the module creates the VPC."
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for s in var.private_subnet_ids : can(regex("^subnet-[0-9a-f]{8}([0-9a-f]{9})?$", s))])
    error_message = "The private_subnet_ids must be subnet ids such as subnet-0123456789abcdef0."
  }
}

variable "public_subnet_ids" {
  type        = list(string)
  description = "With vpc_id and an internet-facing load balancer: public subnets (routed to an internet gateway) for the network load balancer. Empty when the module creates the VPC or the load balancer is internal."
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for s in var.public_subnet_ids : can(regex("^subnet-[0-9a-f]{8}([0-9a-f]{9})?$", s))])
    error_message = "The public_subnet_ids must be subnet ids such as subnet-0123456789abcdef0."
  }
}

variable "vpc_cidr" {
  type        = string
  description = "Address range of the VPC the module creates (vpc_id null): an IPv4 network from /16 to /20, split into one public and one private subnet per Availability Zone."
  default     = "10.20.0.0/16"
  nullable    = false

  validation {
    condition     = can(regex("^[0-9]{1,3}(\\.[0-9]{1,3}){3}/(1[6-9]|20)$", var.vpc_cidr)) && can(cidrnetmask(var.vpc_cidr)) && try(cidrsubnet(var.vpc_cidr, 0, 0) == var.vpc_cidr, false)
    error_message = "The vpc_cidr must be an IPv4 network in canonical form with a prefix from /16 to /20, e.g. 10.20.0.0/16 (not 10.20.1.0/16)."
  }
}

variable "availability_zone_count" {
  type        = number
  description = "Availability Zones the created VPC spans (vpc_id null): one public and one private subnet in each."
  default     = 2
  nullable    = false

  validation {
    condition     = var.availability_zone_count >= 2 && var.availability_zone_count <= 4 && floor(var.availability_zone_count) == var.availability_zone_count
    error_message = "The availability_zone_count must be 2, 3 or 4 (the database and the load balancer need at least 2 zones)."
  }
}

variable "single_nat_gateway" {
  type        = bool
  description = "In the created VPC: one NAT gateway for all private subnets (cheaper), or false for one per Availability Zone (outbound access survives a zone failure)."
  default     = true
  nullable    = false
}

# ---------------------------------------------------------------------------
# Load balancer and public address
# ---------------------------------------------------------------------------

variable "nlb_internal" {
  type        = bool
  description = "Make the network load balancer internal (reachable only from the VPC and networks connected to it) instead of internet-facing."
  default     = false
  nullable    = false
}

variable "allowed_cidrs" {
  type        = list(string)
  description = "IPv4 ranges allowed to reach the gateway (CLI, browsers, Dask clients) on port 443. The load balancer preserves client addresses, so this is enforced by the tasks' security group. Use [\"0.0.0.0/0\"] to allow everyone."
  nullable    = false

  validation {
    condition     = length(var.allowed_cidrs) > 0 && alltrue([for c in var.allowed_cidrs : can(cidrnetmask(c)) && try(cidrsubnet(c, 0, 0) == c, false)])
    error_message = "The allowed_cidrs must be a non-empty list of IPv4 networks in canonical form, e.g. [\"203.0.113.0/24\"] (not 203.0.113.7/24), or [\"0.0.0.0/0\"] for everyone."
  }
}

variable "public_hostname" {
  type        = string
  description = "DNS name users reach the gateway at (you point it at the load balancer's DNS name after apply, and the TLS certificate names it), e.g. dask.example.com. null uses the load balancer's own DNS name."
  default     = null

  validation {
    condition     = var.public_hostname == null || (can(regex("^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$", var.public_hostname)) && length(coalesce(var.public_hostname, "x")) <= 253)
    error_message = "The public_hostname must be null or a lowercase DNS name without scheme, port or path, e.g. dask.example.com."
  }
}

variable "tls_cluster_domain" {
  type        = string
  description = "Optional DNS domain under which the gateway also routes <cluster>.<domain> TLS server names to Dask schedulers (needs a wildcard DNS record and certificate). null: only the built-in daskgateway-<cluster> names."
  default     = null

  validation {
    condition     = var.tls_cluster_domain == null || can(regex("^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$", var.tls_cluster_domain))
    error_message = "The tls_cluster_domain must be null or a lowercase DNS domain such as clusters.example.com."
  }
}

variable "secret_recovery_window_days" {
  type        = number
  description = "Days a deleted Secrets Manager secret of this module (TLS certificate, OIDC client secret) can still be restored; 0 deletes at once."
  default     = 7
  nullable    = false

  validation {
    condition     = var.secret_recovery_window_days == 0 || (var.secret_recovery_window_days >= 7 && var.secret_recovery_window_days <= 30 && floor(var.secret_recovery_window_days) == var.secret_recovery_window_days)
    error_message = "The secret_recovery_window_days must be 0 or a whole number from 7 to 30 (Secrets Manager's limits)."
  }
}

# ---------------------------------------------------------------------------
# Database
# ---------------------------------------------------------------------------

variable "database_url_secret_arn" {
  type        = string
  description = "ARN of an existing Secrets Manager secret whose value is a full postgres://user:password@host:5432/db?sslmode=require URL, to use an external database instead of creating RDS PostgreSQL. null creates the database."
  default     = null

  validation {
    condition     = var.database_url_secret_arn == null || can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:.+$", var.database_url_secret_arn))
    error_message = "The database_url_secret_arn must be null or a Secrets Manager secret ARN such as arn:aws:secretsmanager:us-east-1:123456789012:secret:gateway-db-url-AbCdEf."
  }
}

variable "database_max_connections" {
  type        = number
  description = "Most PostgreSQL connections each gateway replica opens; desired_count times this must stay below the server's max_connections."
  default     = 20
  nullable    = false

  validation {
    condition     = var.database_max_connections >= 2 && var.database_max_connections <= 500 && floor(var.database_max_connections) == var.database_max_connections
    error_message = "The database_max_connections must be a whole number from 2 to 500."
  }
}

variable "db_instance_class" {
  type        = string
  description = "RDS instance class of the created PostgreSQL database."
  default     = "db.t4g.small"
  nullable    = false

  validation {
    condition     = can(regex("^db\\.[a-z0-9-]+\\.[a-z0-9]+$", var.db_instance_class))
    error_message = "The db_instance_class must be an RDS instance class such as db.t4g.small or db.m7g.large."
  }
}

variable "db_engine_version" {
  type        = string
  description = "PostgreSQL version of the created database: a major version (minor upgrades are applied automatically) or major.minor."
  default     = "16"
  nullable    = false

  validation {
    condition     = can(regex("^(1[3-9]|[2-9][0-9])(\\.[0-9]+)?$", var.db_engine_version))
    error_message = "The db_engine_version must be a PostgreSQL version from 13 on, as \"16\" or \"16.4\"."
  }
}

variable "db_allocated_storage" {
  type        = number
  description = "Initial storage of the created database, GiB (gp3)."
  default     = 20
  nullable    = false

  validation {
    condition     = var.db_allocated_storage >= 20 && var.db_allocated_storage <= 65536 && floor(var.db_allocated_storage) == var.db_allocated_storage
    error_message = "The db_allocated_storage must be a whole number of GiB from 20 to 65536."
  }
}

variable "db_max_allocated_storage" {
  type        = number
  description = "Upper bound, GiB, to which RDS grows the database's storage automatically; 0 turns storage autoscaling off."
  default     = 100
  nullable    = false

  validation {
    condition     = var.db_max_allocated_storage == 0 || (var.db_max_allocated_storage >= 20 && var.db_max_allocated_storage <= 65536 && floor(var.db_max_allocated_storage) == var.db_max_allocated_storage)
    error_message = "The db_max_allocated_storage must be 0 (no autoscaling) or a whole number of GiB from 20 to 65536, not below db_allocated_storage."
  }
}

variable "db_multi_az" {
  type        = bool
  description = "Run the created database with a standby in a second Availability Zone (automatic failover; twice the cost)."
  default     = false
  nullable    = false
}

variable "db_backup_retention_days" {
  type        = number
  description = "Days of automated backups (point-in-time recovery) of the created database."
  default     = 7
  nullable    = false

  validation {
    condition     = var.db_backup_retention_days >= 1 && var.db_backup_retention_days <= 35 && floor(var.db_backup_retention_days) == var.db_backup_retention_days
    error_message = "The db_backup_retention_days must be a whole number from 1 to 35."
  }
}

variable "db_deletion_protection" {
  type        = bool
  description = "Refuse to delete the created database (terraform destroy fails until this is set to false and applied)."
  default     = false
  nullable    = false
}

variable "db_skip_final_snapshot" {
  type        = bool
  description = "Delete the created database without a final snapshot on destroy. false keeps a snapshot named gateway-<gateway_id>-final (delete it yourself when no longer needed)."
  default     = false
  nullable    = false
}

# ---------------------------------------------------------------------------
# Identity provider (OpenID Connect) and admins
# ---------------------------------------------------------------------------

variable "oidc_issuer" {
  type        = string
  description = "Issuer URL of your OpenID Connect provider, exactly as in its ID tokens' iss claim (discovered through <issuer>/.well-known/openid-configuration), e.g. https://login.example.com/realms/team."
  nullable    = false

  validation {
    condition     = can(regex("^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[^\\s?#]*)?$", var.oidc_issuer))
    error_message = "The oidc_issuer must be an https:// URL without query or fragment, e.g. https://login.example.com/realms/team."
  }
}

variable "oidc_client_id" {
  type        = string
  description = "Client id of the public OIDC client registered for the gateway (used by `gateway login` and the dashboards' browser sign-in; also the ID tokens' expected audience unless oidc_audience is set)."
  nullable    = false

  validation {
    condition     = can(regex("^[^\\s,]{1,255}$", var.oidc_client_id))
    error_message = "The oidc_client_id must be 1 to 255 characters without spaces or commas."
  }
}

variable "oidc_audience" {
  type        = string
  description = "Audience (aud) ID tokens must carry, when your provider sets one other than the client id. null: the client id."
  default     = null

  validation {
    condition     = var.oidc_audience == null || can(regex("^[^\\s,]{1,255}$", var.oidc_audience))
    error_message = "The oidc_audience must be null or 1 to 255 characters without spaces or commas."
  }
}

variable "oidc_groups_claim" {
  type        = string
  description = "ID token claim holding the user's groups (used for admin_groups and group quotas)."
  default     = "groups"
  nullable    = false

  validation {
    condition     = can(regex("^[^\\s,]{1,128}$", var.oidc_groups_claim))
    error_message = "The oidc_groups_claim must be a claim name of 1 to 128 characters without spaces or commas."
  }
}

variable "oidc_client_secret_required" {
  type        = bool
  description = "Create a Secrets Manager secret (without a value: you put the client secret in after apply) for providers that require a client secret for the dashboards' browser sign-in."
  default     = false
  nullable    = false
}

variable "admin_groups" {
  type        = list(string)
  description = "Groups (from oidc_groups_claim) whose members are gateway admins: quotas, everyone's clusters, usage and audit."
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for g in var.admin_groups : can(regex("^[^,]+$", g)) && trimspace(g) == g])
    error_message = "Each of admin_groups must be non-empty, without commas and without leading or trailing spaces."
  }
}

variable "admin_users" {
  type        = list(string)
  description = "Users (user names as the gateway sees them, or oidc:<sub>) who are gateway admins."
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for u in var.admin_users : can(regex("^[^,]+$", u)) && trimspace(u) == u])
    error_message = "Each of admin_users must be non-empty, without commas and without leading or trailing spaces."
  }
}

# ---------------------------------------------------------------------------
# Where Dask clusters run
# ---------------------------------------------------------------------------

variable "cluster_backend" {
  type        = string
  description = "Where users' Dask clusters run: ec2 (one instance per scheduler and worker; GPUs and spot) or fargate (one ECS task each)."
  default     = "ec2"
  nullable    = false

  validation {
    condition     = contains(["ec2", "fargate"], var.cluster_backend)
    error_message = "The cluster_backend must be \"ec2\" or \"fargate\"."
  }
}

variable "cluster_subnet_ids" {
  type        = list(string)
  description = "Subnets (of the same VPC, with outbound access) Dask schedulers and workers run in, tried in order when one has no capacity. Empty: the private subnets."
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for s in var.cluster_subnet_ids : can(regex("^subnet-[0-9a-f]{8}([0-9a-f]{9})?$", s))])
    error_message = "The cluster_subnet_ids must be subnet ids such as subnet-0123456789abcdef0."
  }
}

variable "dask_image" {
  type        = string
  description = "Container image Dask members run when a cluster names none (needs the dask command). null: the gateway's default (ghcr.io/dask/dask:latest)."
  default     = null

  validation {
    condition     = var.dask_image == null || can(regex("^[^\\s]+$", var.dask_image))
    error_message = "The dask_image must be null or an image reference without spaces."
  }
}

variable "member_volume_gib" {
  type        = number
  description = "ec2 backend: root volume of each Dask instance, GiB (holds the container image and Dask's spill space)."
  default     = 40
  nullable    = false

  validation {
    condition     = var.member_volume_gib >= 30 && var.member_volume_gib <= 16384 && floor(var.member_volume_gib) == var.member_volume_gib
    error_message = "The member_volume_gib must be a whole number from 30 (the ECS-optimized image's snapshot) to 16384."
  }
}

variable "image_pull_repository_arns" {
  type        = list(string)
  description = "Other ECR repositories (ARNs) Dask members may pull images from and the gateway may read, e.g. the repository of dask_image, of published environments, or of a base in base_images outside the module's bases repository. The environment and bases repositories this module creates are always allowed."
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for a in var.image_pull_repository_arns : can(regex("^arn:aws[a-z-]*:ecr:[a-z0-9-]+:[0-9]{12}:repository/[a-z0-9._/-]+$", a))])
    error_message = "The image_pull_repository_arns must be ECR repository ARNs such as arn:aws:ecr:us-east-1:123456789012:repository/team/dask."
  }
}

variable "dask_task_role_policy_arns" {
  type        = list(string)
  description = "fargate backend: IAM policies (ARNs) for the role the Dask processes run as (e.g. read access to a data bucket). Empty: the tasks get no AWS role at all."
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for a in var.dask_task_role_policy_arns : can(regex("^arn:aws[a-z-]*:iam::([0-9]{12}|aws):policy/.+$", a))])
    error_message = "The dask_task_role_policy_arns must be IAM policy ARNs such as arn:aws:iam::123456789012:policy/dask-data-read."
  }
}

variable "cluster_max_workers" {
  type        = number
  description = "Most workers one Dask cluster may have (scale requests are clamped)."
  default     = 50
  nullable    = false

  validation {
    condition     = var.cluster_max_workers >= 1 && var.cluster_max_workers <= 10000 && floor(var.cluster_max_workers) == var.cluster_max_workers
    error_message = "The cluster_max_workers must be a whole number from 1 to 10000."
  }
}

variable "cluster_idle_timeout" {
  type        = string
  description = "A cluster with no tasks and no client this long is stopped, as a Go duration (20m, 1h30m); \"0\" never stops idle clusters."
  default     = "20m"
  nullable    = false

  validation {
    condition     = can(regex("^(0|([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+)$", var.cluster_idle_timeout))
    error_message = "The cluster_idle_timeout must be a Go duration such as 20m, 2h or 1h30m, or 0 for never."
  }
}

variable "cluster_max_lifetime" {
  type        = string
  description = "Clusters running this long are stopped, busy or not, as a Go duration (12h); \"0s\" never."
  default     = "0s"
  nullable    = false

  validation {
    condition     = can(regex("^(0|([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+)$", var.cluster_max_lifetime))
    error_message = "The cluster_max_lifetime must be a Go duration such as 12h or 7h30m, or 0s for never."
  }
}

variable "quotas_on_exceed" {
  type        = string
  description = "What a scale request beyond a user's quota does: clamp (to what fits, with a warning) or refuse."
  default     = "clamp"
  nullable    = false

  validation {
    condition     = contains(["clamp", "refuse"], var.quotas_on_exceed)
    error_message = "The quotas_on_exceed must be \"clamp\" or \"refuse\"."
  }
}

# ---------------------------------------------------------------------------
# Environment images (images.*)
# ---------------------------------------------------------------------------

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
    error_message = "The base_images must list at least one base, each with python as a major.minor version in quotes, e.g. [{ python = \"3.11\" }]."
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
    error_message = "The base_images must not list two bases for the same python, gpu and platform."
  }
}

variable "pip_index_url" {
  type        = string
  description = "Package index the gateway fetches wheels from (images.pip_index_url), PEP 503 simple or PEP 691 JSON, e.g. https://pypi.example.com/simple/. null: the gateway's default (PyPI). An index that needs credentials goes in a secret instead (pip_index_url_secret)."
  default     = null

  validation {
    condition     = var.pip_index_url == null || can(regex("^https?://[^/@\\s]+(/[^\\s]*)?$", var.pip_index_url))
    error_message = "The pip_index_url must be null or an http(s) URL without credentials, e.g. https://pypi.example.com/simple/; put a URL with user:password@ in the secret of pip_index_url_secret."
  }
}

variable "pip_index_url_secret" {
  type        = bool
  description = "Create a Secrets Manager secret (without a value: you put the URL in after apply) holding images.pip_index_url, for an index whose URL carries credentials (https://user:token@pypi.example.com/simple/). It replaces pip_index_url."
  default     = false
  nullable    = false
}

variable "wheel_cache_mib" {
  type        = number
  description = "Largest size of each gateway task's wheel cache, MiB (images.wheel_cache_mib), kept in the task's ephemeral storage under /tmp/gateway/wheels and lost when the task is replaced. Twice this plus 4096 MiB must fit in gateway_ephemeral_storage_gib."
  default     = 4096
  nullable    = false

  validation {
    condition     = var.wheel_cache_mib >= 64 && floor(var.wheel_cache_mib) == var.wheel_cache_mib
    error_message = "The wheel_cache_mib must be a whole number of MiB, at least 64."
  }
}

variable "gateway_ephemeral_storage_gib" {
  type        = number
  description = "Ephemeral storage of each gateway task, GiB: the gateway image, build logs, the wheel cache and the layers being built. 20 is Fargate's default (free); up to 200."
  default     = 20
  nullable    = false

  validation {
    condition     = var.gateway_ephemeral_storage_gib >= 20 && var.gateway_ephemeral_storage_gib <= 200 && floor(var.gateway_ephemeral_storage_gib) == var.gateway_ephemeral_storage_gib
    error_message = "The gateway_ephemeral_storage_gib must be a whole number from 20 (Fargate's default) to 200."
  }
}

variable "ecr_force_delete" {
  type        = bool
  description = "Let terraform destroy delete the environment and base image repositories even when they still hold images."
  default     = false
  nullable    = false
}
