output "gateway_url" {
  description = "URL users, the CLI and dask_gateway reach the gateway at (its public_url)."
  value       = local.public_url
}

output "gateway_ip" {
  description = "The load balancer's external IPv4 address: point var.public_hostname's DNS A record at it."
  value       = google_compute_address.gateway.address
}

output "tls_secret_id" {
  description = "Secret Manager secret (in var.project) for the gateway's TLS certificate. Add a version holding {\"cert\": \"<PEM chain>\", \"key\": \"<PEM key>\"}, then replace the VMs (see tls_secret_command and rolling_replace_command)."
  value       = google_secret_manager_secret.tls.secret_id
}

output "tls_secret_command" {
  description = "Command adding the TLS certificate (fullchain.pem, privkey.pem in the current directory) as the TLS secret's new version."
  value       = "jq -n --rawfile cert fullchain.pem --rawfile key privkey.pem '{cert: $cert, key: $key}' | gcloud secrets versions add ${google_secret_manager_secret.tls.secret_id} --project=${var.project} --data-file=-"
}

output "oidc_client_secret_id" {
  description = "Secret Manager secret (in var.project) for the OIDC client secret, when var.oidc_client_secret_required; add its value as a version (one line), then replace the VMs. null otherwise."
  value       = one(google_secret_manager_secret.oidc_client_secret[*].secret_id)
}

output "artifact_registry_repository" {
  description = "Docker repository (host/path) of the environment images, the gateway's images.repository: <region>-docker.pkg.dev/<project>/<repository>."
  value       = local.environments_repository
}

output "bases_repository" {
  description = "Docker repository (host/path) you put the base images in (tags <python>[-gpu][-arm64], e.g. 3.11), unless base_images names them elsewhere: <region>-docker.pkg.dev/<project>/<repository>."
  value       = local.bases_repository
}

output "image_bases" {
  description = "The base images the gateway builds environments on (images.bases): push each image that is in bases_repository before users build environments."
  value       = local.image_bases
}

output "pip_index_url_secret_id" {
  description = "Secret Manager secret (in var.project) for the package index URL with its credentials, when var.pip_index_url_secret; add it as a version (one line) before the VMs start, then replace them. null otherwise."
  value       = one(google_secret_manager_secret.pip_index_url[*].secret_id)
}

output "gateway_service_account" {
  description = "Email of the gateway's service account (its VMs run as it)."
  value       = google_service_account.gateway.email
}

output "member_service_account" {
  description = "Email of the service account every Dask scheduler and worker runs as."
  value       = google_service_account.members.email
}

output "instance_group_manager" {
  description = "Name of the regional managed instance group of the gateway's VMs."
  value       = google_compute_region_instance_group_manager.gateway.name
}

output "rolling_replace_command" {
  description = "Command replacing the gateway's VMs, new ones first (they read the secrets at boot: run it after adding or changing a secret version)."
  value       = "gcloud compute instance-groups managed rolling-action replace ${google_compute_region_instance_group_manager.gateway.name} --project=${var.project} --region=${var.region} --max-surge=${length(local.zones)} --max-unavailable=0"
}

output "database_instance" {
  description = "Connection name (project:region:instance) of the Cloud SQL instance the module created; null with var.database_url_secret."
  value       = one(google_sql_database_instance.gateway[*].connection_name)
}

output "cli_config" {
  description = "Commands to run once the gateway is up (DNS pointing at gateway_ip, the TLS secret holding a certificate for it): log in with the CLI and start a first cluster."
  value       = <<-EOT
    # Log in (device flow: open the URL it prints and approve; --browser for a browser on this machine):
    gateway login --gateway ${local.public_url}
    gateway whoami
    # A first Dask cluster, and how to connect to it:
    gateway new-cluster --workers 2
    gateway list
  EOT
}
