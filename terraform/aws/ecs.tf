# The gateway service: `desired_count` replicas of the gateway on ECS
# Fargate in the private subnets, behind the network load balancer, sharing
# one PostgreSQL database.
#
# Its whole configuration is the container's environment (GATEWAY_* keys,
# see the repository's docs/configuration.md) and `secrets`
# (values ECS reads from Secrets Manager when the task starts): no
# configuration file. Lists are comma-separated.

locals {
  # Plain settings; null ones are left out (the gateway's default applies).
  gateway_environment_map = {
    "GATEWAY_LISTEN"     = ":8443"
    "GATEWAY_PUBLIC_URL" = local.gateway_url
    "GATEWAY_GATEWAY_ID" = var.gateway_id
    # Fargate disks are ephemeral: state is in PostgreSQL, this holds only
    # build logs and scratch files.
    "GATEWAY_DATA_DIR" = "/tmp/gateway"
    # A replaced task (deployment, certificate renewal, password rotation)
    # leaves its clusters to the other replicas instead of stopping them.
    "GATEWAY_CLUSTER_ON_SHUTDOWN"      = "leave"
    "GATEWAY_LOG_FORMAT"               = "json"
    "GATEWAY_LOG_LEVEL"                = var.log_level
    "GATEWAY_DATABASE_URL"             = local.database_url
    "GATEWAY_DATABASE_MAX_CONNECTIONS" = tostring(var.database_max_connections)
    "GATEWAY_TLS_CLUSTER_DOMAIN"       = var.tls_cluster_domain

    "GATEWAY_AUTH_OIDC_ISSUER"       = var.oidc_issuer
    "GATEWAY_AUTH_OIDC_CLIENT_ID"    = var.oidc_client_id
    "GATEWAY_AUTH_OIDC_AUDIENCE"     = var.oidc_audience
    "GATEWAY_AUTH_OIDC_GROUPS_CLAIM" = var.oidc_groups_claim
    "GATEWAY_AUTH_ADMIN_GROUPS"      = length(var.admin_groups) > 0 ? join(",", var.admin_groups) : null
    "GATEWAY_AUTH_ADMIN_USERS"       = length(var.admin_users) > 0 ? join(",", var.admin_users) : null

    "GATEWAY_PROVIDER" = var.cluster_backend

    # Members admit the gateway by its tasks' security group, not by an
    # address range: other clusters' members share these subnets.
    "GATEWAY_PROVIDERS_EC2_REGION"                 = local.is_ec2 ? local.region : null
    "GATEWAY_PROVIDERS_EC2_SUBNETS"                = local.is_ec2 ? join(",", local.cluster_subnet_ids) : null
    "GATEWAY_PROVIDERS_EC2_GATEWAY_SECURITY_GROUP" = local.is_ec2 ? aws_security_group.gateway.id : null
    "GATEWAY_PROVIDERS_EC2_INSTANCE_PROFILE"       = local.is_ec2 ? aws_iam_instance_profile.member[0].name : null
    "GATEWAY_PROVIDERS_EC2_IMAGE"                  = local.is_ec2 ? var.dask_image : null
    "GATEWAY_PROVIDERS_EC2_VOLUME_GIB"             = local.is_ec2 ? tostring(var.member_volume_gib) : null

    "GATEWAY_PROVIDERS_FARGATE_REGION"                 = local.is_fargate ? local.region : null
    "GATEWAY_PROVIDERS_FARGATE_CLUSTER"                = local.is_fargate ? aws_ecs_cluster.dask[0].name : null
    "GATEWAY_PROVIDERS_FARGATE_SUBNETS"                = local.is_fargate ? join(",", local.cluster_subnet_ids) : null
    "GATEWAY_PROVIDERS_FARGATE_GATEWAY_SECURITY_GROUP" = local.is_fargate ? aws_security_group.gateway.id : null
    "GATEWAY_PROVIDERS_FARGATE_EXECUTION_ROLE_ARN"     = local.is_fargate ? aws_iam_role.dask_execution[0].arn : null
    "GATEWAY_PROVIDERS_FARGATE_TASK_ROLE_ARN"          = one(aws_iam_role.dask_task[*].arn)
    "GATEWAY_PROVIDERS_FARGATE_IMAGE"                  = local.is_fargate ? var.dask_image : null
    "GATEWAY_PROVIDERS_FARGATE_LOG_GROUP"              = local.is_fargate ? aws_cloudwatch_log_group.dask[0].name : null

    # Environment images: built without a Docker engine (Fargate tasks have
    # none), from a base in the bases repository plus one layer per wheel
    # from the package index, and pushed to ECR with the task role's
    # credentials. The wheel cache is in the task's ephemeral storage
    # (gateway_ephemeral_storage_gib), lost when the task is replaced.
    "GATEWAY_IMAGES_REPOSITORY"      = aws_ecr_repository.environments.repository_url
    "GATEWAY_IMAGES_AUTH"            = "ecr"
    "GATEWAY_IMAGES_AWS_REGION"      = local.region
    "GATEWAY_IMAGES_BUILDER"         = "layers"
    "GATEWAY_IMAGES_BASES"           = jsonencode(local.image_bases)
    "GATEWAY_IMAGES_PIP_INDEX_URL"   = var.pip_index_url_secret ? null : var.pip_index_url
    "GATEWAY_IMAGES_WHEEL_CACHE_DIR" = "/tmp/gateway/wheels"
    "GATEWAY_IMAGES_WHEEL_CACHE_MIB" = tostring(var.wheel_cache_mib)

    "GATEWAY_CLUSTER_MAX_WORKERS"  = tostring(var.cluster_max_workers)
    "GATEWAY_CLUSTER_IDLE_TIMEOUT" = var.cluster_idle_timeout
    "GATEWAY_CLUSTER_MAX_LIFETIME" = var.cluster_max_lifetime
    "GATEWAY_QUOTAS_ON_EXCEED"     = var.quotas_on_exceed
  }

  # Secret settings: name to Secrets Manager reference ("<arn>:<json key>::"
  # takes one key of a JSON secret, a bare ARN the whole value).
  gateway_secrets_map = {
    "GATEWAY_TLS_CERT_PEM"            = "${aws_secretsmanager_secret.tls.arn}:cert::"
    "GATEWAY_TLS_KEY_PEM"             = "${aws_secretsmanager_secret.tls.arn}:key::"
    "GATEWAY_DATABASE_PASSWORD"       = local.database_password_from
    "GATEWAY_DATABASE_URL"            = local.database_url_from
    "GATEWAY_AUTH_OIDC_CLIENT_SECRET" = one(aws_secretsmanager_secret.oidc_client_secret[*].arn)
    "GATEWAY_IMAGES_PIP_INDEX_URL"    = one(aws_secretsmanager_secret.pip_index_url[*].arn)
  }

  gateway_environment = [for k, v in local.gateway_environment_map : { name = k, value = v } if v != null]
  gateway_secrets     = [for k, v in local.gateway_secrets_map : { name = k, valueFrom = v } if v != null]

  # The secrets the execution role may read: those referenced above.
  gateway_secret_arns = [for arn in [
    aws_secretsmanager_secret.tls.arn,
    local.database_master_secret_arn,
    local.database_url_from,
    one(aws_secretsmanager_secret.oidc_client_secret[*].arn),
    one(aws_secretsmanager_secret.pip_index_url[*].arn),
  ] : arn if arn != null]

  # Fargate's allowed memory (MiB) for each CPU size: [min, max, step].
  fargate_memory = {
    "256"   = [512, 2048, 512]
    "512"   = [1024, 4096, 1024]
    "1024"  = [2048, 8192, 1024]
    "2048"  = [4096, 16384, 1024]
    "4096"  = [8192, 30720, 1024]
    "8192"  = [16384, 61440, 4096]
    "16384" = [32768, 122880, 8192]
  }
  gateway_memory_range = local.fargate_memory[tostring(var.gateway_cpu)]
}

resource "aws_ecs_cluster" "gateway" {
  name = local.name
  tags = local.tags
}

resource "aws_ecs_task_definition" "gateway" {
  # Not gateway-*: that is the gateway's own families for Dask tasks, which
  # its role may run.
  family                   = "${local.short_name}-server"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = tostring(var.gateway_cpu)
  memory                   = tostring(var.gateway_memory)
  execution_role_arn       = aws_iam_role.gateway_execution.arn
  task_role_arn            = aws_iam_role.gateway_task.arn
  tags                     = local.tags

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = var.gateway_cpu_architecture
  }

  # Fargate gives 20 GiB without this block; more is billed.
  dynamic "ephemeral_storage" {
    for_each = var.gateway_ephemeral_storage_gib > 20 ? [var.gateway_ephemeral_storage_gib] : []

    content {
      size_in_gib = ephemeral_storage.value
    }
  }

  # The image's default command runs `gateway serve`.
  container_definitions = jsonencode([{
    name      = "gateway"
    image     = var.gateway_image
    essential = true
    portMappings = [{
      containerPort = 8443
      protocol      = "tcp"
    }]
    environment = local.gateway_environment
    secrets     = local.gateway_secrets
    # The gateway drains requests on SIGTERM (Fargate allows up to 120 s).
    stopTimeout     = 60
    linuxParameters = { initProcessEnabled = true }
    logConfiguration = {
      logDriver = "awslogs"
      options = {
        "awslogs-group"         = aws_cloudwatch_log_group.gateway.name
        "awslogs-region"        = local.region
        "awslogs-stream-prefix" = "gateway"
      }
    }
  }])

  lifecycle {
    precondition {
      condition = (
        var.gateway_memory >= local.gateway_memory_range[0] &&
        var.gateway_memory <= local.gateway_memory_range[1] &&
        var.gateway_memory % local.gateway_memory_range[2] == 0
      )
      error_message = "Fargate does not offer gateway_memory = ${var.gateway_memory} MiB with gateway_cpu = ${var.gateway_cpu}: use ${local.gateway_memory_range[0]} to ${local.gateway_memory_range[1]} MiB in steps of ${local.gateway_memory_range[2]}."
    }

    # The wheel cache, the layers made from it (bounded alike) and the
    # scratch space of builds share the ephemeral storage with the image.
    precondition {
      condition     = 2 * var.wheel_cache_mib + 4096 <= var.gateway_ephemeral_storage_gib * 1024
      error_message = "wheel_cache_mib = ${var.wheel_cache_mib} does not fit in gateway_ephemeral_storage_gib = ${var.gateway_ephemeral_storage_gib}: twice the cache plus 4096 MiB must fit, so lower wheel_cache_mib to ${floor((var.gateway_ephemeral_storage_gib * 1024 - 4096) / 2)} or raise gateway_ephemeral_storage_gib to ${ceil((2 * var.wheel_cache_mib + 4096) / 1024)}."
    }

    precondition {
      condition     = !(var.pip_index_url_secret && var.pip_index_url != null)
      error_message = "Set pip_index_url or pip_index_url_secret, not both: with pip_index_url_secret the URL is the secret's value."
    }
  }
}

resource "aws_ecs_service" "gateway" {
  name             = "gateway"
  cluster          = aws_ecs_cluster.gateway.id
  task_definition  = aws_ecs_task_definition.gateway.arn
  desired_count    = var.desired_count
  launch_type      = "FARGATE"
  platform_version = "LATEST"

  # Rolling replacement: replicas share the database and hand clusters over
  # through leases, so old and new run side by side for a while.
  deployment_minimum_healthy_percent = 50
  deployment_maximum_percent         = 200
  health_check_grace_period_seconds  = 60
  enable_ecs_managed_tags            = true
  propagate_tags                     = "SERVICE"
  tags                               = local.tags

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  network_configuration {
    subnets          = local.private_subnet_ids
    security_groups  = [aws_security_group.gateway.id]
    assign_public_ip = false
  }

  load_balancer {
    target_group_arn = aws_lb_target_group.gateway.arn
    container_name   = "gateway"
    container_port   = 8443
  }

  lifecycle {
    precondition {
      condition     = length(local.private_subnet_ids) > 0
      error_message = "With vpc_id set, give private_subnet_ids: the gateway tasks run there."
    }
  }

  # Permissions and the listener first, so that the first tasks can start
  # and register.
  depends_on = [
    aws_lb_listener.gateway,
    aws_iam_role_policy.gateway_execution,
    aws_iam_role_policy.gateway_ec2,
    aws_iam_role_policy.gateway_fargate,
    aws_iam_role_policy.gateway_ecr,
  ]
}

# ---------------------------------------------------------------------------
# fargate backend: the ECS cluster users' Dask tasks run in, apart from the
# gateway's, with spot capacity for `new-cluster --spot`.
# ---------------------------------------------------------------------------

resource "aws_ecs_cluster" "dask" {
  count = local.is_fargate ? 1 : 0

  name = "${local.name}-dask"
  tags = local.tags
}

resource "aws_ecs_cluster_capacity_providers" "dask" {
  count = local.is_fargate ? 1 : 0

  cluster_name       = aws_ecs_cluster.dask[0].name
  capacity_providers = ["FARGATE", "FARGATE_SPOT"]

  default_capacity_provider_strategy {
    capacity_provider = "FARGATE"
    weight            = 1
    base              = 0
  }
}
