# The gateway's state: RDS PostgreSQL, shared by all replicas (leases,
# clusters, quotas, usage). Its master password is generated and kept by
# RDS in Secrets Manager (manage_master_user_password), so it is never in
# Terraform's state; the gateway gets the URL without it and the password
# from that secret. With database_url_secret_arn, an external database is
# used instead and nothing here is created.

resource "aws_security_group" "database" {
  count = local.create_db ? 1 : 0

  name        = "${local.name}-database"
  description = "Gateway database: PostgreSQL from the gateway tasks only"
  vpc_id      = local.vpc_id
  tags        = merge(local.tags, { Name = "${local.name}-database" })
}

resource "aws_vpc_security_group_ingress_rule" "database_from_gateway" {
  count = local.create_db ? 1 : 0

  security_group_id            = aws_security_group.database[0].id
  description                  = "PostgreSQL from the gateway tasks"
  referenced_security_group_id = aws_security_group.gateway.id
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  tags                         = local.tags
}

resource "aws_db_subnet_group" "this" {
  count = local.create_db ? 1 : 0

  name       = local.name
  subnet_ids = local.private_subnet_ids
  tags       = local.tags

  lifecycle {
    precondition {
      condition     = length(local.private_subnet_ids) >= 2
      error_message = "RDS needs private subnets in at least 2 Availability Zones: give 2 or more private_subnet_ids (or set database_url_secret_arn to use an external database)."
    }
  }
}

resource "aws_db_instance" "this" {
  count = local.create_db ? 1 : 0

  identifier     = local.name
  engine         = "postgres"
  engine_version = var.db_engine_version
  instance_class = var.db_instance_class

  allocated_storage     = var.db_allocated_storage
  max_allocated_storage = var.db_max_allocated_storage
  storage_type          = "gp3"
  storage_encrypted     = true

  db_name  = "gateway"
  username = "gateway"
  # RDS generates the password and keeps it in a Secrets Manager secret
  # (master_user_secret): it never appears in Terraform's state.
  manage_master_user_password = true
  port                        = 5432

  db_subnet_group_name   = aws_db_subnet_group.this[0].name
  vpc_security_group_ids = [aws_security_group.database[0].id]
  publicly_accessible    = false
  multi_az               = var.db_multi_az

  backup_retention_period    = var.db_backup_retention_days
  copy_tags_to_snapshot      = true
  deletion_protection        = var.db_deletion_protection
  skip_final_snapshot        = var.db_skip_final_snapshot
  final_snapshot_identifier  = "${local.name}-final"
  auto_minor_version_upgrade = true
  tags                       = local.tags

  lifecycle {
    precondition {
      condition     = var.db_max_allocated_storage == 0 || var.db_max_allocated_storage >= var.db_allocated_storage
      error_message = "The db_max_allocated_storage must be 0 (no autoscaling) or at least db_allocated_storage."
    }
  }
}

locals {
  # What the gateway's container gets (see ecs.tf). Created database: the URL
  # without password in the environment, the password from the RDS-managed
  # secret's "password" key (TLS required: PostgreSQL 15 and later on RDS
  # refuse plain connections anyway). External database: the whole URL from
  # the operator's secret.
  database_url = local.create_db ? format(
    "postgres://%s@%s:%d/%s?sslmode=require",
    aws_db_instance.this[0].username, aws_db_instance.this[0].address, aws_db_instance.this[0].port, aws_db_instance.this[0].db_name,
  ) : null
  database_master_secret_arn = local.create_db ? aws_db_instance.this[0].master_user_secret[0].secret_arn : null
  database_password_from     = local.create_db ? "${aws_db_instance.this[0].master_user_secret[0].secret_arn}:password::" : null
  database_url_from          = local.create_db ? null : var.database_url_secret_arn
}
