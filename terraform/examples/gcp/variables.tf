variable "project" {
  type        = string
  description = "ID of the Google Cloud project to deploy the gateway in (e.g. my-project-123)."

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project))
    error_message = "project must be a project ID (6-30 lower-case letters, digits and hyphens, starting with a letter), not a project name or number."
  }
}

variable "region" {
  type        = string
  description = "Region of the gateway and of its Dask clusters, e.g. us-central1."
  default     = "us-central1"

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Compute Engine region name such as us-central1 or europe-west4."
  }
}

variable "gateway_image" {
  type        = string
  description = "The gateway's container image, with an explicit tag, as pushed in README.md step 3, e.g. us-central1-docker.pkg.dev/my-project/gateway/gateway:v1."

  validation {
    condition     = can(regex("^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[a-f0-9]{64})$", var.gateway_image))
    error_message = "gateway_image must be a full image reference with a registry host and an explicit tag or digest, e.g. us-central1-docker.pkg.dev/my-project/gateway/gateway:v1."
  }
}

variable "oidc_issuer" {
  type        = string
  description = "Your OpenID Connect issuer URL, exactly as in the tokens' iss claim, e.g. https://login.example.com/realms/main."

  validation {
    condition     = can(regex("^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[^\\s?#]*)?$", var.oidc_issuer))
    error_message = "oidc_issuer must be an https:// URL with no query or fragment."
  }
}

variable "oidc_client_id" {
  type        = string
  description = "Client ID of the public OIDC client registered for the gateway (README.md step 2)."

  validation {
    condition     = can(regex("^[^\\s,]{1,255}$", var.oidc_client_id))
    error_message = "oidc_client_id must be 1-255 characters without spaces or commas."
  }
}

variable "allowed_cidrs" {
  type        = list(string)
  description = "IPv4 ranges allowed to reach the gateway: your users' and notebooks' public addresses, e.g. [\"203.0.113.0/24\"]."

  validation {
    condition = length(var.allowed_cidrs) > 0 && alltrue([
      for c in var.allowed_cidrs :
      can(regex("^([0-9]{1,3}\\.){3}[0-9]{1,3}/[0-9]{1,2}$", c)) && try(cidrsubnet(c, 0, 0) == c, false)
    ])
    error_message = "allowed_cidrs must be a non-empty list of IPv4 CIDR ranges with no host bits set, e.g. [\"203.0.113.0/24\", \"198.51.100.7/32\"]."
  }
}

variable "public_hostname" {
  type        = string
  description = "DNS name of the gateway (e.g. dask.example.com), which the TLS certificate is for. null: https://<load balancer IP>, with the gateway's self-signed certificate (a first test only)."
  default     = null

  validation {
    condition     = var.public_hostname == null || can(regex("^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$", var.public_hostname))
    error_message = "public_hostname must be a lower-case DNS name such as dask.example.com (no scheme, port or path)."
  }
}

variable "deletion_protection" {
  type        = bool
  description = "Protect the Cloud SQL database from deletion. Set false and apply before `terraform destroy`."
  default     = true
}
