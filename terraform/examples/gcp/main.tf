# A minimal deployment of the gateway on Google Cloud: the module with the
# fewest inputs. It creates its own VPC, Cloud SQL database, secrets,
# service accounts, image repository, the gateway's VMs and their load
# balancer. See README.md for every step, before and after `terraform apply`.

provider "google" {
  project = var.project
  region  = var.region
}

module "gateway" {
  source = "../../gcp"

  project        = var.project
  region         = var.region
  gateway_image  = var.gateway_image
  oidc_issuer    = var.oidc_issuer
  oidc_client_id = var.oidc_client_id
  allowed_cidrs  = var.allowed_cidrs

  # Optional; see README.md.
  public_hostname              = var.public_hostname
  database_deletion_protection = var.deletion_protection
}
