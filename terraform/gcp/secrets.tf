# Secrets the gateway's VMs read at boot, each readable by the gateway's
# service account alone (a binding per secret, none project-wide). The
# module creates the TLS and OIDC client secrets WITHOUT a version: their
# values never pass through Terraform. The operator adds them after apply
# (see README.md) and replaces the VMs, which read the latest version at
# boot.

# The gateway's HTTPS certificate: the latest version holds the JSON
# {"cert": "<PEM chain>", "key": "<PEM key>"}. Until it has one, the gateway
# serves a self-signed certificate of its own.
resource "google_secret_manager_secret" "tls" {
  project   = var.project
  secret_id = "${local.name}-tls"
  labels    = local.labels

  replication {
    auto {}
  }
}

# The OIDC client secret, for identity providers that want one for the
# browser sign-in: the latest version holds the secret alone, one line.
resource "google_secret_manager_secret" "oidc_client_secret" {
  count     = var.oidc_client_secret_required ? 1 : 0
  project   = var.project
  secret_id = "${local.name}-oidc-client-secret"
  labels    = local.labels

  replication {
    auto {}
  }
}

# The package index's URL with its credentials (images.pip_index_url), for
# an index that needs them: the latest version holds the URL alone, one
# line, e.g. https://user:token@pypi.example.com/simple/.
resource "google_secret_manager_secret" "pip_index_url" {
  count     = var.pip_index_url_secret ? 1 : 0
  project   = var.project
  secret_id = "${local.name}-pip-index-url"
  labels    = local.labels

  replication {
    auto {}
  }
}

locals {
  # Secret Manager resource names the startup script reads ("" for none).
  tls_secret_path               = "projects/${var.project}/secrets/${google_secret_manager_secret.tls.secret_id}"
  oidc_client_secret_path       = var.oidc_client_secret_required ? "projects/${var.project}/secrets/${local.name}-oidc-client-secret" : ""
  pip_index_url_secret_path     = var.pip_index_url_secret ? "projects/${var.project}/secrets/${local.name}-pip-index-url" : ""
  database_password_secret_path = local.managed_database ? "projects/${var.project}/secrets/${local.name}-database-password" : ""
  database_url_secret_path      = local.managed_database ? "" : "projects/${local.database_url_secret_project}/secrets/${local.database_url_secret_id}"

  # Every secret the gateway reads, for its per-secret access bindings. The
  # keys depend on variables only, so that for_each knows them at plan time.
  gateway_secrets = {
    for s in [
      { key = "tls", project = var.project, secret = google_secret_manager_secret.tls.secret_id, enabled = true },
      { key = "oidc-client-secret", project = var.project, secret = one(google_secret_manager_secret.oidc_client_secret[*].secret_id), enabled = var.oidc_client_secret_required },
      { key = "pip-index-url", project = var.project, secret = one(google_secret_manager_secret.pip_index_url[*].secret_id), enabled = var.pip_index_url_secret },
      { key = "database-password", project = var.project, secret = one(google_secret_manager_secret.database_password[*].secret_id), enabled = local.managed_database },
      { key = "database-url", project = local.database_url_secret_project, secret = local.database_url_secret_id, enabled = !local.managed_database },
    ] : s.key => s if s.enabled
  }
}

resource "google_secret_manager_secret_iam_member" "gateway" {
  for_each  = local.gateway_secrets
  project   = each.value.project
  secret_id = each.value.secret
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.gateway.email}"
}
