# IAM: least privilege for each identity.
#
#   gateway task role       what the gateway's Go code calls: the backend's
#                           document (gateway_ec2 or gateway_fargate) and
#                           gateway_ecr. Their action lists are literal and
#                           are checked against the code by
#                           terraform/modules_test.go.
#   gateway execution role  ECS itself: pull the gateway image, write its
#                           logs, read the secrets listed in its task
#                           definition.
#   member role (ec2)       Dask instances: read their cluster's TLS
#                           parameter, pull images.
#   Dask execution role     ECS for Dask tasks (fargate): pull images, write
#   (fargate)               logs, read each cluster's TLS secret.
#   Dask task role          what Dask code may call (fargate), only when
#   (fargate, optional)     dask_task_role_policy_arns is set.
#
# Ownership: the gateway tags every instance, volume, security group, SSM
# parameter, secret, task and task definition it makes with
# gateway-id = <gateway_id> (and gateway-cluster). Where AWS evaluates tags
# for an action, the policies below require that tag: on the request for
# creating actions (aws:RequestTag), on the resource for changing and
# deleting ones (aws:ResourceTag). What AWS cannot scope is said where it
# is granted.

# ---------------------------------------------------------------------------
# Trust policies
# ---------------------------------------------------------------------------

data "aws_iam_policy_document" "ecs_tasks_assume" {
  statement {
    sid     = "EcsTasksOfThisAccount"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }

    # Only ECS acting for this account (confused-deputy protection).
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

data "aws_iam_policy_document" "ec2_assume" {
  statement {
    sid     = "Ec2Instances"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

# ---------------------------------------------------------------------------
# The gateway's task role
# ---------------------------------------------------------------------------

resource "aws_iam_role" "gateway_task" {
  name               = "${local.name}-gateway-task"
  description        = "Gateway ${var.gateway_id}: what the gateway calls to run Dask clusters (${var.cluster_backend}) and push environment images"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json
  tags               = local.tags
}

# The ec2 backend (providers/ec2).
data "aws_iam_policy_document" "gateway_ec2" {
  count = local.is_ec2 ? 1 : 0

  # EC2's Describe* calls support no resource-level permissions or tag
  # conditions: AWS only accepts "*" for them. They read, never change.
  statement {
    sid = "DescribeEc2"
    actions = [
      "ec2:DescribeImages",
      "ec2:DescribeInstanceTypes",
      "ec2:DescribeInstances",
      "ec2:DescribeSecurityGroups",
      "ec2:DescribeSpotInstanceRequests",
      "ec2:DescribeSubnets",
    ]
    resources = ["*"]
  }

  # A security group per cluster: only in this VPC, only tagged as this
  # gateway's.
  statement {
    sid       = "CreateSecurityGroupInVpc"
    actions   = ["ec2:CreateSecurityGroup"]
    resources = ["${local.ec2_arn}:vpc/${local.vpc_id}"]
  }

  statement {
    sid       = "CreateOwnSecurityGroups"
    actions   = ["ec2:CreateSecurityGroup"]
    resources = ["${local.ec2_arn}:security-group/*"]

    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/gateway-id"
      values   = [var.gateway_id]
    }
  }

  # Rules are added to and removed from, and groups deleted from, this
  # gateway's groups only.
  statement {
    sid = "ChangeOwnSecurityGroups"
    actions = [
      "ec2:AuthorizeSecurityGroupIngress",
      "ec2:DeleteSecurityGroup",
      "ec2:RevokeSecurityGroupIngress",
    ]
    resources = ["${local.ec2_arn}:security-group/*"]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/gateway-id"
      values   = [var.gateway_id]
    }
  }

  # Instances and their volumes are launched only tagged as this gateway's.
  statement {
    sid     = "RunOwnInstances"
    actions = ["ec2:RunInstances"]
    resources = [
      "${local.ec2_arn}:instance/*",
      "${local.ec2_arn}:volume/*",
    ]

    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/gateway-id"
      values   = [var.gateway_id]
    }
  }

  # ... into subnets and security groups of this VPC only ...
  statement {
    sid     = "RunInstancesInVpc"
    actions = ["ec2:RunInstances"]
    resources = [
      "${local.ec2_arn}:subnet/*",
      "${local.ec2_arn}:security-group/*",
    ]

    condition {
      test     = "ArnEquals"
      variable = "ec2:Vpc"
      values   = ["${local.ec2_arn}:vpc/${local.vpc_id}"]
    }
  }

  # ... with the other resources a launch involves: the image (public
  # ECS-optimized AMIs belong to Amazon, hence no account in the ARN), the
  # network interface it creates, and for --spot the spot request.
  statement {
    sid     = "RunInstancesWith"
    actions = ["ec2:RunInstances"]
    resources = [
      "arn:${local.partition}:ec2:${local.region}::image/*",
      "${local.ec2_arn}:network-interface/*",
      "${local.ec2_arn}:spot-instances-request/*",
    ]
  }

  # Tags only as part of creating an instance, volume or security group,
  # never on existing resources (which could otherwise be tagged into the
  # gateway's reach).
  statement {
    sid       = "TagOnCreate"
    actions   = ["ec2:CreateTags"]
    resources = ["${local.ec2_arn}:*/*"]

    condition {
      test     = "StringEquals"
      variable = "ec2:CreateAction"
      values   = ["RunInstances", "CreateSecurityGroup"]
    }
  }

  statement {
    sid       = "TerminateOwnInstances"
    actions   = ["ec2:TerminateInstances"]
    resources = ["${local.ec2_arn}:instance/*"]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/gateway-id"
      values   = [var.gateway_id]
    }
  }

  # The console of a member that shut itself down (its start-up version
  # check found other versions than the client's): this gateway's only.
  statement {
    sid       = "ReadOwnConsoles"
    actions   = ["ec2:GetConsoleOutput"]
    resources = ["${local.ec2_arn}:instance/*"]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/gateway-id"
      values   = [var.gateway_id]
    }
  }

  # The members' instance profile, and no other role, to EC2 only.
  statement {
    sid       = "PassMemberRole"
    actions   = ["iam:PassRole"]
    resources = [aws_iam_role.member[0].arn]

    condition {
      test     = "StringEquals"
      variable = "iam:PassedToService"
      values   = ["ec2.amazonaws.com"]
    }
  }

  # Each cluster's TLS material: SecureString /gateway/<gateway_id>/<cluster>/tls.
  # Encrypted with the account's aws/ssm key, whose key policy already lets
  # SSM use it for this account: no KMS grant is needed here.
  statement {
    sid = "ClusterTlsParameters"
    actions = [
      "ssm:AddTagsToResource",
      "ssm:DeleteParameter",
      "ssm:PutParameter",
    ]
    resources = ["${local.ssm_arn}:parameter/gateway/${var.gateway_id}/*"]
  }

  # The reaper lists this gateway's TLS parameters by path and tag
  # (names and dates, never values) to remove those no instance leads to
  # any more. DescribeParameters supports no resource-level permissions:
  # "*" only.
  statement {
    sid       = "ListParameters"
    actions   = ["ssm:DescribeParameters"]
    resources = ["*"]
  }

  # The public parameters naming the current ECS-optimized AMIs (owned by
  # AWS: no account in their ARN).
  statement {
    sid       = "PublicAmiParameters"
    actions   = ["ssm:GetParameter"]
    resources = ["arn:${local.partition}:ssm:${local.region}::parameter/aws/service/*"]
  }
}

# The fargate backend (providers/fargate).
data "aws_iam_policy_document" "gateway_fargate" {
  count = local.is_fargate ? 1 : 0

  # Describe* support no resource-level permissions: "*" only. Read-only.
  statement {
    sid = "DescribeEc2"
    actions = [
      "ec2:DescribeSecurityGroups",
      "ec2:DescribeSubnets",
    ]
    resources = ["*"]
  }

  statement {
    sid       = "CreateSecurityGroupInVpc"
    actions   = ["ec2:CreateSecurityGroup"]
    resources = ["${local.ec2_arn}:vpc/${local.vpc_id}"]
  }

  statement {
    sid       = "CreateOwnSecurityGroups"
    actions   = ["ec2:CreateSecurityGroup"]
    resources = ["${local.ec2_arn}:security-group/*"]

    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/gateway-id"
      values   = [var.gateway_id]
    }
  }

  statement {
    sid = "ChangeOwnSecurityGroups"
    actions = [
      "ec2:AuthorizeSecurityGroupIngress",
      "ec2:DeleteSecurityGroup",
      "ec2:RevokeSecurityGroupIngress",
    ]
    resources = ["${local.ec2_arn}:security-group/*"]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/gateway-id"
      values   = [var.gateway_id]
    }
  }

  statement {
    sid       = "TagSecurityGroupsOnCreate"
    actions   = ["ec2:CreateTags"]
    resources = ["${local.ec2_arn}:security-group/*"]

    condition {
      test     = "StringEquals"
      variable = "ec2:CreateAction"
      values   = ["CreateSecurityGroup"]
    }
  }

  # ECS reads: listing and describing task definitions and tasks support no
  # resource-level permissions (or only per task, whose ARN is not known
  # before listing): "*" only.
  statement {
    sid = "DescribeEcs"
    actions = [
      "ecs:DescribeTaskDefinition",
      "ecs:DescribeTasks",
      "ecs:ListTaskDefinitionFamilies",
      "ecs:ListTaskDefinitions",
      "ecs:ListTasks",
    ]
    resources = ["*"]
  }

  # Task definitions are registered only tagged as this gateway's.
  statement {
    sid       = "RegisterOwnTaskDefinitions"
    actions   = ["ecs:RegisterTaskDefinition"]
    resources = ["*"]

    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/gateway-id"
      values   = [var.gateway_id]
    }
  }

  # Deregistering and deleting task definitions accept neither task
  # definition ARNs nor tag conditions in IAM: "*" only. A task definition is
  # a document, not a running resource; the gateway removes its own
  # clusters' (families gateway-<hash>-<cluster>-...) when they stop.
  statement {
    sid = "RemoveTaskDefinitions"
    actions = [
      "ecs:DeleteTaskDefinitions",
      "ecs:DeregisterTaskDefinition",
    ]
    resources = ["*"]
  }

  # Tasks run only from the gateway's task definitions, only in the Dask
  # cluster, and only tagged as this gateway's.
  statement {
    sid       = "RunOwnTasks"
    actions   = ["ecs:RunTask"]
    resources = ["${local.ecs_arn}:task-definition/gateway-*"]

    condition {
      test     = "ArnEquals"
      variable = "ecs:cluster"
      values   = [one(aws_ecs_cluster.dask[*].arn)]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/gateway-id"
      values   = [var.gateway_id]
    }
  }

  statement {
    sid       = "StopOwnTasks"
    actions   = ["ecs:StopTask"]
    resources = ["${local.ecs_arn}:task/${one(aws_ecs_cluster.dask[*].name)}/*"]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/gateway-id"
      values   = [var.gateway_id]
    }
  }

  # Tags only while registering a task definition or running a task.
  statement {
    sid       = "TagEcsOnCreate"
    actions   = ["ecs:TagResource"]
    resources = ["*"]

    condition {
      test     = "StringEquals"
      variable = "ecs:CreateAction"
      values   = ["RegisterTaskDefinition", "RunTask"]
    }
  }

  # The Dask tasks' execution role (and task role, when there is one), to
  # ECS tasks only.
  statement {
    sid       = "PassDaskRoles"
    actions   = ["iam:PassRole"]
    resources = concat(aws_iam_role.dask_execution[*].arn, aws_iam_role.dask_task[*].arn)

    condition {
      test     = "StringEquals"
      variable = "iam:PassedToService"
      values   = ["ecs-tasks.amazonaws.com"]
    }
  }

  # Each cluster's TLS secret, gateway/<hash of gateway_id>/<cluster>/tls:
  # created only tagged as this gateway's (TagResource is what tagging at
  # creation needs), deleted only when so tagged. Encrypted with the
  # account's aws/secretsmanager key: no KMS grant is needed.
  statement {
    sid = "CreateOwnSecrets"
    actions = [
      "secretsmanager:CreateSecret",
      "secretsmanager:TagResource",
    ]
    resources = ["${local.secrets_arn}:secret:gateway/*"]

    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/gateway-id"
      values   = [var.gateway_id]
    }
  }

  statement {
    sid       = "DescribeSecrets"
    actions   = ["secretsmanager:DescribeSecret"]
    resources = ["${local.secrets_arn}:secret:gateway/*"]
  }

  # The reaper lists this gateway's secrets by name and tag (names, dates
  # and tags, never values) to remove those no task leads to any more.
  # ListSecrets supports no resource-level permissions: "*" only.
  statement {
    sid       = "ListSecrets"
    actions   = ["secretsmanager:ListSecrets"]
    resources = ["*"]
  }

  statement {
    sid       = "DeleteOwnSecrets"
    actions   = ["secretsmanager:DeleteSecret"]
    resources = ["${local.secrets_arn}:secret:gateway/*"]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/gateway-id"
      values   = [var.gateway_id]
    }
  }

  # The last lines of a member whose start-up version check found other
  # versions than the client's (the table it printed): the Dask log group
  # only.
  statement {
    sid       = "ReadDaskLogs"
    actions   = ["logs:GetLogEvents"]
    resources = ["${aws_cloudwatch_log_group.dask[0].arn}:log-stream:*"]
  }
}

# Environment images (images/build): push to and read from the environment
# repository; read the base images and the other repositories members may
# pull from. terraform/modules_test.go checks each statement's actions
# against the builder's: build.ECRUnscopedActions (on "*"),
# build.ECRRepositoryActions (on the environment repository) and
# build.ECRReadActions (on the others).
data "aws_iam_policy_document" "gateway_ecr" {
  # ECR's registry token is per account and region: AWS accepts only "*".
  statement {
    sid       = "EcrToken"
    actions   = ["ecr:GetAuthorizationToken"]
    resources = ["*"]
  }

  # The registry protocol's push (blob checks, chunked uploads, the
  # manifest) and reads (the cache check, an environment's labels).
  statement {
    sid = "PushAndReadEnvironments"
    actions = [
      "ecr:BatchCheckLayerAvailability",
      "ecr:BatchGetImage",
      "ecr:CompleteLayerUpload",
      "ecr:GetDownloadUrlForLayer",
      "ecr:InitiateLayerUpload",
      "ecr:PutImage",
      "ecr:UploadLayerPart",
    ]
    resources = [aws_ecr_repository.environments.arn]
  }

  # The bases (manifest, config and layers, which a push copies or mounts
  # into the environment repository), and the other repositories members may
  # pull from (image_pull_repository_arns), so that the gateway can check
  # the versions recorded in an image named with --image or published in
  # images.environments. Read only.
  statement {
    sid = "ReadBasesAndOtherImages"
    actions = [
      "ecr:BatchGetImage",
      "ecr:GetDownloadUrlForLayer",
    ]
    resources = concat([aws_ecr_repository.bases.arn], var.image_pull_repository_arns)
  }
}

resource "aws_iam_role_policy" "gateway_ec2" {
  count = local.is_ec2 ? 1 : 0

  name   = "ec2-backend"
  role   = aws_iam_role.gateway_task.id
  policy = data.aws_iam_policy_document.gateway_ec2[0].json
}

resource "aws_iam_role_policy" "gateway_fargate" {
  count = local.is_fargate ? 1 : 0

  name   = "fargate-backend"
  role   = aws_iam_role.gateway_task.id
  policy = data.aws_iam_policy_document.gateway_fargate[0].json
}

resource "aws_iam_role_policy" "gateway_ecr" {
  name   = "environment-images"
  role   = aws_iam_role.gateway_task.id
  policy = data.aws_iam_policy_document.gateway_ecr.json
}

# ---------------------------------------------------------------------------
# The gateway's execution role (used by ECS, not by the gateway)
# ---------------------------------------------------------------------------

resource "aws_iam_role" "gateway_execution" {
  name               = "${local.name}-gateway-execution"
  description        = "Gateway ${var.gateway_id}: ECS pulls the gateway image, writes its logs and reads its secrets"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json
  tags               = local.tags
}

data "aws_iam_policy_document" "gateway_execution" {
  statement {
    sid = "GatewayLogs"
    actions = [
      "logs:CreateLogStream",
      "logs:PutLogEvents",
    ]
    resources = ["${aws_cloudwatch_log_group.gateway.arn}:*"]
  }

  # Exactly the secrets in the task definition's `secrets`.
  statement {
    sid       = "GatewaySecrets"
    actions   = ["secretsmanager:GetSecretValue"]
    resources = local.gateway_secret_arns
  }

  # When the gateway image is in ECR: that repository only.
  dynamic "statement" {
    for_each = local.gateway_image_repository_arn == null ? [] : [local.gateway_image_repository_arn]

    content {
      sid       = "GatewayImageToken"
      actions   = ["ecr:GetAuthorizationToken"]
      resources = ["*"]
    }
  }

  dynamic "statement" {
    for_each = local.gateway_image_repository_arn == null ? [] : [local.gateway_image_repository_arn]

    content {
      sid = "GatewayImagePull"
      actions = [
        "ecr:BatchCheckLayerAvailability",
        "ecr:BatchGetImage",
        "ecr:GetDownloadUrlForLayer",
      ]
      resources = [statement.value]
    }
  }
}

resource "aws_iam_role_policy" "gateway_execution" {
  name   = "gateway-execution"
  role   = aws_iam_role.gateway_execution.id
  policy = data.aws_iam_policy_document.gateway_execution.json
}

# ---------------------------------------------------------------------------
# ec2 backend: the Dask instances' role and instance profile
# ---------------------------------------------------------------------------

resource "aws_iam_role" "member" {
  count = local.is_ec2 ? 1 : 0

  name               = "${local.name}-member"
  description        = "Gateway ${var.gateway_id}: Dask schedulers and workers on EC2 read their cluster's TLS parameter and pull images"
  assume_role_policy = data.aws_iam_policy_document.ec2_assume.json
  tags               = local.tags
}

resource "aws_iam_instance_profile" "member" {
  count = local.is_ec2 ? 1 : 0

  name = "${local.name}-member"
  role = aws_iam_role.member[0].name
  tags = local.tags
}

data "aws_iam_policy_document" "member" {
  count = local.is_ec2 ? 1 : 0

  # Every cluster's parameter: one role serves all members (a member blocks
  # the instance metadata service, and so these credentials, from users'
  # code once it has read its own).
  statement {
    sid       = "ClusterTlsParameters"
    actions   = ["ssm:GetParameter"]
    resources = ["${local.ssm_arn}:parameter/gateway/${var.gateway_id}/*"]
  }

  # SecureString decryption, through SSM only.
  statement {
    sid       = "DecryptThroughSsm"
    actions   = ["kms:Decrypt"]
    resources = ["arn:${local.partition}:kms:${local.region}:${local.account_id}:key/*"]

    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = ["ssm.${local.region}.amazonaws.com"]
    }
  }

  # ECR's registry token is per account and region: "*" only.
  statement {
    sid       = "EcrToken"
    actions   = ["ecr:GetAuthorizationToken"]
    resources = ["*"]
  }

  statement {
    sid = "PullImages"
    actions = [
      "ecr:BatchCheckLayerAvailability",
      "ecr:BatchGetImage",
      "ecr:GetDownloadUrlForLayer",
    ]
    resources = local.member_pull_repository_arns
  }
}

resource "aws_iam_role_policy" "member" {
  count = local.is_ec2 ? 1 : 0

  name   = "dask-member"
  role   = aws_iam_role.member[0].id
  policy = data.aws_iam_policy_document.member[0].json
}

# ---------------------------------------------------------------------------
# fargate backend: the Dask tasks' execution role and optional task role
# ---------------------------------------------------------------------------

resource "aws_iam_role" "dask_execution" {
  count = local.is_fargate ? 1 : 0

  name               = "${local.name}-dask-execution"
  description        = "Gateway ${var.gateway_id}: ECS pulls Dask images, writes their logs and reads each cluster's TLS secret"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json
  tags               = local.tags
}

data "aws_iam_policy_document" "dask_execution" {
  count = local.is_fargate ? 1 : 0

  statement {
    sid       = "EcrToken"
    actions   = ["ecr:GetAuthorizationToken"]
    resources = ["*"]
  }

  statement {
    sid = "PullImages"
    actions = [
      "ecr:BatchCheckLayerAvailability",
      "ecr:BatchGetImage",
      "ecr:GetDownloadUrlForLayer",
    ]
    resources = local.member_pull_repository_arns
  }

  statement {
    sid = "DaskLogs"
    actions = [
      "logs:CreateLogStream",
      "logs:PutLogEvents",
    ]
    resources = ["${aws_cloudwatch_log_group.dask[0].arn}:*"]
  }

  # The clusters' TLS secrets, and only this gateway's (by their name and
  # their tag). ECS reads them for the tasks; the tasks themselves (the task
  # role, which users' code holds) may not.
  statement {
    sid       = "ClusterTlsSecrets"
    actions   = ["secretsmanager:GetSecretValue"]
    resources = ["${local.secrets_arn}:secret:gateway/${local.gateway_key}/*"]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/gateway-id"
      values   = [var.gateway_id]
    }
  }
}

resource "aws_iam_role_policy" "dask_execution" {
  count = local.is_fargate ? 1 : 0

  name   = "dask-execution"
  role   = aws_iam_role.dask_execution[0].id
  policy = data.aws_iam_policy_document.dask_execution[0].json
}

resource "aws_iam_role" "dask_task" {
  count = local.is_fargate && length(var.dask_task_role_policy_arns) > 0 ? 1 : 0

  name               = "${local.name}-dask-task"
  description        = "Gateway ${var.gateway_id}: what users' Dask code on Fargate may call"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json
  tags               = local.tags
}

resource "aws_iam_role_policy_attachment" "dask_task" {
  for_each = local.is_fargate ? toset(var.dask_task_role_policy_arns) : toset([])

  role       = aws_iam_role.dask_task[0].name
  policy_arn = each.value
}

# Users' code holds the task role's credentials. Whatever the policies in
# dask_task_role_policy_arns grant (SecretsManagerReadWrite, say), it never
# reads a cluster's TLS secret, or a member's parameter: with one, code on
# one cluster could connect to another's scheduler. An explicit deny wins
# over any allow.
data "aws_iam_policy_document" "dask_task_no_cluster_secrets" {
  count = local.is_fargate && length(var.dask_task_role_policy_arns) > 0 ? 1 : 0

  statement {
    sid    = "NoClusterTlsSecrets"
    effect = "Deny"
    actions = [
      "secretsmanager:BatchGetSecretValue",
      "secretsmanager:GetSecretValue",
    ]
    resources = ["${local.secrets_arn}:secret:gateway/*"]
  }

  statement {
    sid    = "NoClusterTlsParameters"
    effect = "Deny"
    actions = [
      "ssm:GetParameter",
      "ssm:GetParameterHistory",
      "ssm:GetParameters",
      "ssm:GetParametersByPath",
    ]
    resources = ["${local.ssm_arn}:parameter/gateway/*"]
  }
}

resource "aws_iam_role_policy" "dask_task_no_cluster_secrets" {
  count = local.is_fargate && length(var.dask_task_role_policy_arns) > 0 ? 1 : 0

  name   = "no-cluster-secrets"
  role   = aws_iam_role.dask_task[0].id
  policy = data.aws_iam_policy_document.dask_task_no_cluster_secrets[0].json
}
