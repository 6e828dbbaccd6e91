# CloudWatch Logs: the gateway's JSON logs, and with the fargate backend the
# Dask schedulers' and workers' output (awslogs, stream prefix "gateway").

resource "aws_cloudwatch_log_group" "gateway" {
  name              = "/ecs/${local.name}"
  retention_in_days = var.log_retention_days
  tags              = local.tags
}

resource "aws_cloudwatch_log_group" "dask" {
  count = local.is_fargate ? 1 : 0

  name              = "/ecs/${local.name}-dask"
  retention_in_days = var.log_retention_days
  tags              = local.tags
}
