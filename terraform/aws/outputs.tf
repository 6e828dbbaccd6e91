output "gateway_url" {
  description = "URL users and clients reach the gateway at (https://, port 443): public_hostname when given, else the load balancer's DNS name."
  value       = local.gateway_url
}

output "nlb_dns_name" {
  description = "DNS name of the network load balancer: point public_hostname at it (CNAME, or a Route 53 alias with nlb_zone_id)."
  value       = aws_lb.gateway.dns_name
}

output "nlb_zone_id" {
  description = "Route 53 hosted zone id of the load balancer, for an alias record."
  value       = aws_lb.gateway.zone_id
}

output "tls_secret_arn" {
  description = "ARN of the Secrets Manager secret (created empty) that must hold the gateway's certificate as JSON {\"cert\": \"<PEM chain>\", \"key\": \"<PEM key>\"}."
  value       = aws_secretsmanager_secret.tls.arn
}

output "oidc_client_secret_arn" {
  description = "ARN of the Secrets Manager secret (created empty) for the OIDC client secret, as plain text; null when oidc_client_secret_required is false."
  value       = one(aws_secretsmanager_secret.oidc_client_secret[*].arn)
}

output "database_master_secret_arn" {
  description = "ARN of the RDS-managed secret holding the database's master credentials; null with an external database."
  value       = local.database_master_secret_arn
}

output "ecr_repository_url" {
  description = "ECR repository environment images are pushed to and pulled from."
  value       = aws_ecr_repository.environments.repository_url
}

output "bases_repository_url" {
  description = "ECR repository you put the base images in (tags <python>[-gpu][-arm64], e.g. 3.11), unless base_images names them elsewhere."
  value       = aws_ecr_repository.bases.repository_url
}

output "image_bases" {
  description = "The base images the gateway builds environments on (images.bases): push each image that is in bases_repository_url before users build environments."
  value       = local.image_bases
}

output "pip_index_url_secret_arn" {
  description = "ARN of the Secrets Manager secret (created empty) for the package index URL with its credentials, as plain text; null when pip_index_url_secret is false."
  value       = one(aws_secretsmanager_secret.pip_index_url[*].arn)
}

output "gateway_task_role_arn" {
  description = "ARN of the IAM role the gateway runs as (its backend's permissions and the environment repository)."
  value       = aws_iam_role.gateway_task.arn
}

output "member_instance_profile" {
  description = "ec2 backend: name of the instance profile Dask instances run with; null with fargate."
  value       = one(aws_iam_instance_profile.member[*].name)
}

output "dask_ecs_cluster" {
  description = "fargate backend: name of the ECS cluster Dask tasks run in; null with ec2."
  value       = one(aws_ecs_cluster.dask[*].name)
}

output "gateway_ecs_cluster" {
  description = "Name of the ECS cluster of the gateway service."
  value       = aws_ecs_cluster.gateway.name
}

output "gateway_ecs_service" {
  description = "Name of the gateway's ECS service (aws ecs update-service --force-new-deployment restarts it with fresh secrets)."
  value       = aws_ecs_service.gateway.name
}

output "gateway_log_group" {
  description = "CloudWatch Logs group of the gateway (aws logs tail <group> --follow)."
  value       = aws_cloudwatch_log_group.gateway.name
}

output "vpc_id" {
  description = "VPC the gateway and the Dask members run in."
  value       = local.vpc_id
}

output "private_subnet_ids" {
  description = "Private subnets of the gateway tasks (their ranges are the Dask members' only allowed sources)."
  value       = local.private_subnet_ids
}

output "cli_config" {
  description = "Commands that point the gateway CLI at this gateway and start a first cluster."
  value       = <<-EOT
    # Log in with your identity provider (device flow: open the URL it prints;
    # --browser uses a browser on this machine instead). When the certificate
    # is not from a public CA, add --ca-file ca.pem to the login (it is kept).
    gateway login --gateway ${local.gateway_url}
    gateway whoami
    # A first Dask cluster with 2 workers (${var.cluster_backend} backend):
    gateway new-cluster --workers 2
    gateway list
  EOT
}
