output "gateway_url" {
  description = "URL of the gateway: what `gateway login --gateway` takes."
  value       = module.gateway.gateway_url
}

output "nlb_dns_name" {
  description = "DNS name of the load balancer: point public_hostname at it (CNAME)."
  value       = module.gateway.nlb_dns_name
}

output "nlb_zone_id" {
  description = "Route 53 hosted zone id of the load balancer, for an alias record instead of a CNAME."
  value       = module.gateway.nlb_zone_id
}

output "tls_secret_arn" {
  description = "Secrets Manager secret to put the TLS certificate into, as JSON {\"cert\": ..., \"key\": ...}."
  value       = module.gateway.tls_secret_arn
}

output "oidc_client_secret_arn" {
  description = "Secrets Manager secret to put the OIDC client secret into; null unless oidc_client_secret_required is turned on in main.tf."
  value       = module.gateway.oidc_client_secret_arn
}

output "ecr_repository_url" {
  description = "ECR repository of the environment images."
  value       = module.gateway.ecr_repository_url
}

output "gateway_task_role_arn" {
  description = "IAM role the gateway runs as."
  value       = module.gateway.gateway_task_role_arn
}

output "member_instance_profile" {
  description = "Instance profile of the Dask instances (ec2 backend)."
  value       = module.gateway.member_instance_profile
}

output "gateway_ecs_cluster" {
  description = "ECS cluster of the gateway service (for aws ecs update-service)."
  value       = module.gateway.gateway_ecs_cluster
}

output "gateway_ecs_service" {
  description = "ECS service of the gateway (for aws ecs update-service --force-new-deployment)."
  value       = module.gateway.gateway_ecs_service
}

output "gateway_log_group" {
  description = "CloudWatch Logs group of the gateway (aws logs tail)."
  value       = module.gateway.gateway_log_group
}

output "cli_config" {
  description = "Commands to log in to the gateway and start a first cluster."
  value       = module.gateway.cli_config
}
