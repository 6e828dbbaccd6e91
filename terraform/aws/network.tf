# Network: an existing VPC and subnets (vpc_id set), or a new VPC with one
# public and one private subnet per Availability Zone, NAT for the private
# ones, and a free S3 gateway endpoint (image layers from ECR come from S3).
# Private subnets hold the gateway tasks, the database and the Dask members;
# public subnets hold the internet-facing load balancer and the NAT gateways.

data "aws_vpc" "existing" {
  count = local.create_vpc ? 0 : 1
  id    = var.vpc_id
}

data "aws_subnet" "private" {
  for_each = local.create_vpc ? toset([]) : toset(var.private_subnet_ids)
  id       = each.value
}

data "aws_availability_zones" "available" {
  count = local.create_vpc ? 1 : 0
  state = "available"

  filter {
    name   = "opt-in-status"
    values = ["opt-in-not-required"]
  }
}

resource "aws_vpc" "this" {
  count = local.create_vpc ? 1 : 0

  cidr_block           = var.vpc_cidr
  enable_dns_support   = true
  enable_dns_hostnames = true
  tags                 = merge(local.tags, { Name = local.name })

  lifecycle {
    precondition {
      condition     = length(var.private_subnet_ids) == 0 && length(var.public_subnet_ids) == 0
      error_message = "The private_subnet_ids and public_subnet_ids are for an existing VPC: set vpc_id too, or leave them empty to have the module create the subnets."
    }
    precondition {
      condition     = length(data.aws_availability_zones.available[0].names) >= var.availability_zone_count
      error_message = "This region has fewer available Availability Zones than availability_zone_count."
    }
  }
}

# Public subnets: the first availability_zone_count /4-subdivisions of the
# VPC range; private subnets: from the middle of it on.
resource "aws_subnet" "public" {
  count = local.create_vpc ? var.availability_zone_count : 0

  vpc_id                  = aws_vpc.this[0].id
  cidr_block              = cidrsubnet(var.vpc_cidr, 4, count.index)
  availability_zone       = data.aws_availability_zones.available[0].names[count.index]
  map_public_ip_on_launch = false
  tags                    = merge(local.tags, { Name = "${local.name}-public-${data.aws_availability_zones.available[0].names[count.index]}" })
}

resource "aws_subnet" "private" {
  count = local.create_vpc ? var.availability_zone_count : 0

  vpc_id            = aws_vpc.this[0].id
  cidr_block        = cidrsubnet(var.vpc_cidr, 4, count.index + 8)
  availability_zone = data.aws_availability_zones.available[0].names[count.index]
  tags              = merge(local.tags, { Name = "${local.name}-private-${data.aws_availability_zones.available[0].names[count.index]}" })
}

resource "aws_internet_gateway" "this" {
  count = local.create_vpc ? 1 : 0

  vpc_id = aws_vpc.this[0].id
  tags   = merge(local.tags, { Name = local.name })
}

resource "aws_route_table" "public" {
  count = local.create_vpc ? 1 : 0

  vpc_id = aws_vpc.this[0].id
  tags   = merge(local.tags, { Name = "${local.name}-public" })
}

resource "aws_route" "public_internet" {
  count = local.create_vpc ? 1 : 0

  route_table_id         = aws_route_table.public[0].id
  destination_cidr_block = "0.0.0.0/0"
  gateway_id             = aws_internet_gateway.this[0].id
}

resource "aws_route_table_association" "public" {
  count = local.create_vpc ? var.availability_zone_count : 0

  subnet_id      = aws_subnet.public[count.index].id
  route_table_id = aws_route_table.public[0].id
}

locals {
  nat_gateway_count = local.create_vpc ? (var.single_nat_gateway ? 1 : var.availability_zone_count) : 0
}

resource "aws_eip" "nat" {
  count = local.nat_gateway_count

  domain     = "vpc"
  tags       = merge(local.tags, { Name = "${local.name}-nat-${count.index}" })
  depends_on = [aws_internet_gateway.this]
}

resource "aws_nat_gateway" "this" {
  count = local.nat_gateway_count

  allocation_id = aws_eip.nat[count.index].id
  subnet_id     = aws_subnet.public[count.index].id
  tags          = merge(local.tags, { Name = "${local.name}-${count.index}" })
  depends_on    = [aws_internet_gateway.this]
}

# One route table per private subnet, each to its zone's NAT gateway (or the
# single one).
resource "aws_route_table" "private" {
  count = local.create_vpc ? var.availability_zone_count : 0

  vpc_id = aws_vpc.this[0].id
  tags   = merge(local.tags, { Name = "${local.name}-private-${count.index}" })
}

resource "aws_route" "private_nat" {
  count = local.create_vpc ? var.availability_zone_count : 0

  route_table_id         = aws_route_table.private[count.index].id
  destination_cidr_block = "0.0.0.0/0"
  nat_gateway_id         = aws_nat_gateway.this[var.single_nat_gateway ? 0 : count.index].id
}

resource "aws_route_table_association" "private" {
  count = local.create_vpc ? var.availability_zone_count : 0

  subnet_id      = aws_subnet.private[count.index].id
  route_table_id = aws_route_table.private[count.index].id
}

resource "aws_vpc_endpoint" "s3" {
  count = local.create_vpc ? 1 : 0

  vpc_id            = aws_vpc.this[0].id
  service_name      = "com.amazonaws.${local.region}.s3"
  vpc_endpoint_type = "Gateway"
  route_table_ids   = aws_route_table.private[*].id
  tags              = merge(local.tags, { Name = "${local.name}-s3" })
}

# ---------------------------------------------------------------------------
# Security groups of the gateway tasks and the database. The Dask members'
# groups are made by the gateway itself, per cluster, admitting on the
# scheduler's ports only this group (the gateway tasks), and all TCP from
# the cluster's own group: never an address range, so one cluster's members
# cannot reach another's, though they share subnets.
# ---------------------------------------------------------------------------

resource "aws_security_group" "gateway" {
  name        = "${local.name}-tasks"
  description = "Gateway tasks: HTTPS and Dask TLS on 8443 from allowed clients and the load balancer's health checks"
  vpc_id      = local.vpc_id
  tags        = merge(local.tags, { Name = "${local.name}-tasks" })
}

# The load balancer preserves client addresses (see nlb.tf), so the clients'
# ranges are what the tasks see and what this group admits.
resource "aws_vpc_security_group_ingress_rule" "gateway_clients" {
  # The VPC's own range is admitted by the rule below; a second identical
  # rule would be refused by EC2.
  for_each = toset([for c in var.allowed_cidrs : c if c != local.vpc_cidr])

  security_group_id = aws_security_group.gateway.id
  description       = "Gateway clients"
  cidr_ipv4         = each.value
  ip_protocol       = "tcp"
  from_port         = 8443
  to_port           = 8443
  tags              = local.tags
}

# Health checks come from the load balancer's addresses in its subnets,
# inside the VPC.
resource "aws_vpc_security_group_ingress_rule" "gateway_health_checks" {
  security_group_id = aws_security_group.gateway.id
  description       = "Load balancer health checks, and clients inside the VPC"
  cidr_ipv4         = local.vpc_cidr
  ip_protocol       = "tcp"
  from_port         = 8443
  to_port           = 8443
  tags              = local.tags
}

# Outbound: the identity provider, AWS APIs, the database and the Dask
# schedulers (8786-8787 in the private subnets).
resource "aws_vpc_security_group_egress_rule" "gateway_all" {
  security_group_id = aws_security_group.gateway.id
  description       = "Identity provider, AWS APIs, database, Dask schedulers"
  cidr_ipv4         = "0.0.0.0/0"
  ip_protocol       = "-1"
  tags              = local.tags
}
