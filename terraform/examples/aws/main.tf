# A complete gateway deployment on AWS with the module's defaults: a new
# VPC, 2 gateway replicas on Fargate behind an internet-facing network load
# balancer, RDS PostgreSQL, and Dask clusters on EC2. README.md walks through
# it end to end.

provider "aws" {
  region = var.region

  default_tags {
    tags = {
      project = "dask-gateway"
    }
  }
}

module "gateway" {
  source = "../../aws"

  gateway_image   = var.gateway_image
  oidc_issuer     = var.oidc_issuer
  oidc_client_id  = var.oidc_client_id
  allowed_cidrs   = var.allowed_cidrs
  public_hostname = var.public_hostname
  admin_groups    = var.admin_groups
}
