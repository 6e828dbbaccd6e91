# The gateway on AWS: shared data sources and the values the other files
# derive from the inputs. Nothing here configures a provider: the caller
# does (see ../examples/aws).

data "aws_region" "current" {}

data "aws_caller_identity" "current" {}

data "aws_partition" "current" {}

locals {
  # Names of this module's resources. Never the tag key gateway-id: the
  # gateway's role may stop and delete whatever carries gateway-id=<id>
  # (its own clusters' machines, groups, secrets), and its reaper looks for
  # such resources.
  name = "gateway-${var.gateway_id}"
  # Load balancer and target group names are limited to 32 characters and
  # may not end with '-'.
  short_name = replace(substr("gw-${var.gateway_id}", 0, 29), "/-+$/", "")
  tags       = merge(var.tags, { "gateway-deployment" = var.gateway_id })

  region     = data.aws_region.current.name
  account_id = data.aws_caller_identity.current.account_id
  partition  = data.aws_partition.current.partition
  # Prefixes of the ARNs of this account's resources in this region.
  ec2_arn     = "arn:${local.partition}:ec2:${local.region}:${local.account_id}"
  ecs_arn     = "arn:${local.partition}:ecs:${local.region}:${local.account_id}"
  ssm_arn     = "arn:${local.partition}:ssm:${local.region}:${local.account_id}"
  secrets_arn = "arn:${local.partition}:secretsmanager:${local.region}:${local.account_id}"

  is_ec2     = var.cluster_backend == "ec2"
  is_fargate = var.cluster_backend == "fargate"
  create_db  = var.database_url_secret_arn == null

  # Network: created (vpc_id null) or given.
  create_vpc           = var.vpc_id == null
  vpc_id               = local.create_vpc ? aws_vpc.this[0].id : var.vpc_id
  vpc_cidr             = local.create_vpc ? var.vpc_cidr : data.aws_vpc.existing[0].cidr_block
  private_subnet_ids   = local.create_vpc ? aws_subnet.private[*].id : var.private_subnet_ids
  public_subnet_ids    = local.create_vpc ? aws_subnet.public[*].id : var.public_subnet_ids
  private_subnet_cidrs = local.create_vpc ? aws_subnet.private[*].cidr_block : [for id in var.private_subnet_ids : data.aws_subnet.private[id].cidr_block]
  nlb_subnet_ids       = var.nlb_internal ? local.private_subnet_ids : local.public_subnet_ids
  # Where Dask members run. Their security groups (made by the gateway per
  # cluster) admit the gateway tasks' security group and themselves, no
  # address range, so members may share the gateway's subnets.
  cluster_subnet_ids = length(var.cluster_subnet_ids) > 0 ? var.cluster_subnet_ids : local.private_subnet_ids

  # The fargate backend names each cluster's TLS secret
  # gateway/<first 8 hex digits of sha256(gateway_id)>/<cluster>/tls
  # (providers/fargate, secretName): the Dask execution role reads those.
  gateway_key = substr(sha256(var.gateway_id), 0, 8)

  # The address users reach: the operator's DNS name, else the load
  # balancer's own, always on port 443.
  gateway_host = var.public_hostname != null ? var.public_hostname : aws_lb.gateway.dns_name
  gateway_url  = "https://${local.gateway_host}"

  # The ECR repository of the gateway image, when it is one (its execution
  # role may then pull from it and nothing else).
  gateway_image_ecr = try(regex("^(?P<account>[0-9]{12})\\.dkr\\.ecr\\.(?P<region>[a-z0-9-]+)\\.amazonaws\\.com(?:\\.cn)?/(?P<repository>[a-z0-9._/-]+)", var.gateway_image), null)
  gateway_image_repository_arn = local.gateway_image_ecr == null ? null : format(
    "arn:%s:ecr:%s:%s:repository/%s",
    local.partition, local.gateway_image_ecr.region, local.gateway_image_ecr.account, local.gateway_image_ecr.repository,
  )

  # Repositories Dask members (EC2 instances, Fargate tasks) may pull from:
  # the environments, the bases (so that dask_image, what clusters without
  # an environment run, may be one of them) and the operator's others.
  member_pull_repository_arns = concat([aws_ecr_repository.environments.arn, aws_ecr_repository.bases.arn], var.image_pull_repository_arns)
}
