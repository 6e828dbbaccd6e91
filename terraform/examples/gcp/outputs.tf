output "gateway_url" {
  description = "URL of the gateway."
  value       = module.gateway.gateway_url
}

output "gateway_ip" {
  description = "The load balancer's address: point your DNS name at it."
  value       = module.gateway.gateway_ip
}

output "tls_secret_id" {
  description = "Secret Manager secret to add the TLS certificate to (see tls_secret_command)."
  value       = module.gateway.tls_secret_id
}

output "tls_secret_command" {
  description = "Command adding fullchain.pem and privkey.pem as the TLS secret's version."
  value       = module.gateway.tls_secret_command
}

output "rolling_replace_command" {
  description = "Command replacing the gateway's VMs so that they read the secrets again."
  value       = module.gateway.rolling_replace_command
}

output "artifact_registry_repository" {
  description = "Repository of the environment images the gateway builds (its images.repository)."
  value       = module.gateway.artifact_registry_repository
}

output "gateway_service_account" {
  description = "The gateway's service account."
  value       = module.gateway.gateway_service_account
}

output "member_service_account" {
  description = "The Dask schedulers' and workers' service account."
  value       = module.gateway.member_service_account
}

output "instance_group_manager" {
  description = "The gateway VMs' managed instance group."
  value       = module.gateway.instance_group_manager
}

output "cli_config" {
  description = "CLI commands to log in and start a first cluster."
  value       = module.gateway.cli_config
}

output "oidc_client_secret_id" {
  description = "Secret Manager secret for the OIDC client secret when the module is asked for one; null otherwise."
  value       = module.gateway.oidc_client_secret_id
}

output "database_instance" {
  description = "Connection name of the Cloud SQL instance (project:region:instance)."
  value       = module.gateway.database_instance
}
