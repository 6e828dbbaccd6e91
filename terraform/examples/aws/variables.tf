variable "region" {
  type        = string
  description = "AWS region to deploy into, e.g. us-east-1."
  nullable    = false

  validation {
    condition     = can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]+$", var.region))
    error_message = "The region must be an AWS region name such as us-east-1 or eu-west-2."
  }
}

variable "gateway_image" {
  type        = string
  description = "The gateway image you built from the repository's root Dockerfile and pushed, e.g. 123456789012.dkr.ecr.us-east-1.amazonaws.com/gateway:1.0.0."
  nullable    = false

  validation {
    condition     = can(regex("^[^\\s]+$", var.gateway_image))
    error_message = "The gateway_image must be a non-empty image reference without spaces, e.g. 123456789012.dkr.ecr.us-east-1.amazonaws.com/gateway:1.0.0."
  }
}

variable "oidc_issuer" {
  type        = string
  description = "Issuer URL of your OpenID Connect provider, exactly as in its ID tokens (iss), e.g. https://login.example.com/realms/team."
  nullable    = false

  validation {
    condition     = can(regex("^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[^\\s?#]*)?$", var.oidc_issuer))
    error_message = "The oidc_issuer must be an https:// URL without query or fragment, e.g. https://login.example.com/realms/team."
  }
}

variable "oidc_client_id" {
  type        = string
  description = "Client id of the public client you registered for the gateway with your OpenID Connect provider."
  nullable    = false

  validation {
    condition     = can(regex("^[^\\s,]{1,255}$", var.oidc_client_id))
    error_message = "The oidc_client_id must be 1 to 255 characters without spaces or commas."
  }
}

variable "allowed_cidrs" {
  type        = list(string)
  description = "IPv4 ranges allowed to reach the gateway on port 443 (your users' and Dask clients' addresses), e.g. [\"203.0.113.0/24\"]; [\"0.0.0.0/0\"] for everyone."
  nullable    = false

  validation {
    condition     = length(var.allowed_cidrs) > 0 && alltrue([for c in var.allowed_cidrs : can(cidrnetmask(c)) && try(cidrsubnet(c, 0, 0) == c, false)])
    error_message = "The allowed_cidrs must be a non-empty list of IPv4 networks in canonical form, e.g. [\"203.0.113.0/24\"], or [\"0.0.0.0/0\"] for everyone."
  }
}

variable "public_hostname" {
  type        = string
  description = "DNS name you will point at the load balancer and have a TLS certificate for, e.g. dask.example.com. null: the load balancer's own DNS name (with a self-signed certificate)."
  default     = null

  validation {
    condition     = var.public_hostname == null || can(regex("^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$", var.public_hostname))
    error_message = "The public_hostname must be null or a lowercase DNS name without scheme, port or path, e.g. dask.example.com."
  }
}

variable "admin_groups" {
  type        = list(string)
  description = "Groups (the ID token's groups claim) whose members are gateway admins, e.g. [\"dask-admins\"]."
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for g in var.admin_groups : can(regex("^[^,]+$", g)) && trimspace(g) == g])
    error_message = "Each of admin_groups must be non-empty, without commas and without leading or trailing spaces."
  }
}
