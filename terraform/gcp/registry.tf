# The Artifact Registry repository for environment images: the gateway
# pushes the images it builds from users' Python environments there
# (images.repository), and the Dask members pull them.

resource "google_artifact_registry_repository" "environments" {
  project       = var.project
  location      = var.region
  repository_id = "${local.name}-environments"
  description   = "Gateway ${var.gateway_id}: Dask environment images built by the gateway (tags env-<hash>)."
  format        = "DOCKER"
  labels        = local.labels

  cleanup_policy_dry_run = false

  dynamic "cleanup_policies" {
    for_each = var.environment_image_max_age_days == null ? [] : [var.environment_image_max_age_days]
    content {
      id     = "delete-older-than-${cleanup_policies.value}-days"
      action = "DELETE"

      condition {
        tag_state  = "ANY"
        older_than = "${cleanup_policies.value * 86400}s"
      }
    }
  }
}

locals {
  # The docker host/path to push to and pull from (images.repository).
  environments_repository = "${var.region}-docker.pkg.dev/${var.project}/${google_artifact_registry_repository.environments.repository_id}"

  # The gateway's own image, when it is in Artifact Registry:
  # [location, project, repository].
  gateway_image_repository = try(regex("^([a-z0-9-]+)-docker\\.pkg\\.dev/([a-z0-9-]+)/([a-z0-9._-]+)/", var.gateway_image), null)
}

# The gateway pushes environment images (and reads them to check their
# contents): writer on this repository only.
resource "google_artifact_registry_repository_iam_member" "gateway_environments" {
  project    = var.project
  location   = var.region
  repository = google_artifact_registry_repository.environments.repository_id
  role       = "roles/artifactregistry.writer"
  member     = "serviceAccount:${google_service_account.gateway.email}"
}

# The Dask members pull environment images: reader on this repository only.
resource "google_artifact_registry_repository_iam_member" "members_environments" {
  project    = var.project
  location   = var.region
  repository = google_artifact_registry_repository.environments.repository_id
  role       = "roles/artifactregistry.reader"
  member     = "serviceAccount:${google_service_account.members.email}"
}

# The gateway's VMs pull the gateway's image: reader on its repository,
# when it is in Artifact Registry (a public image needs nothing).
resource "google_artifact_registry_repository_iam_member" "gateway_image" {
  count      = local.gateway_image_repository == null ? 0 : 1
  project    = local.gateway_image_repository[1]
  location   = local.gateway_image_repository[0]
  repository = local.gateway_image_repository[2]
  role       = "roles/artifactregistry.reader"
  member     = "serviceAccount:${google_service_account.gateway.email}"
}
