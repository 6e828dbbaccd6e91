# Artifact Registry repositories for images:
#
#   environments  the gateway pushes the images it builds from users'
#                 Python environments there (images.repository), and the
#                 Dask members pull them.
#   bases         you put the base images environments are built on there
#                 (images.bases, tags such as 3.11, 3.11-gpu): the gateway
#                 reads them and pushes each environment as the base's
#                 layers plus one layer per wheel. See README.md, "Base
#                 images".

resource "google_artifact_registry_repository" "environments" {
  project       = var.project
  location      = var.region
  repository_id = "${local.name}-environments"
  description   = "Gateway ${var.gateway_id}: Dask environment images built by the gateway (tags env-<hash>)."
  format        = "DOCKER"
  labels        = local.labels

  cleanup_policy_dry_run = false

  # Untagged versions are those a newer push of the same tag replaced.
  cleanup_policies {
    id     = "delete-untagged"
    action = "DELETE"

    condition {
      tag_state  = "UNTAGGED"
      older_than = "604800s"
    }
  }

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

resource "google_artifact_registry_repository" "bases" {
  project       = var.project
  location      = var.region
  repository_id = "${local.name}-bases"
  description   = "Gateway ${var.gateway_id}: base images environments are built on (tags <python>[-gpu][-arm64])."
  format        = "DOCKER"
  labels        = local.labels

  cleanup_policy_dry_run = false

  cleanup_policies {
    id     = "delete-untagged"
    action = "DELETE"

    condition {
      tag_state  = "UNTAGGED"
      older_than = "604800s"
    }
  }
}

locals {
  # The docker host/path to push to and pull from (images.repository).
  environments_repository = "${var.region}-docker.pkg.dev/${var.project}/${google_artifact_registry_repository.environments.repository_id}"
  bases_repository        = "${var.region}-docker.pkg.dev/${var.project}/${google_artifact_registry_repository.bases.repository_id}"

  # images.bases, as the gateway reads it: a base without an image is
  # <bases repository>:<python>[-gpu][-arm64].
  image_bases = [for b in var.base_images : {
    python   = b.python
    image    = b.image != null ? b.image : "${local.bases_repository}:${b.python}${b.gpu ? "-gpu" : ""}${b.platform == "linux/amd64" ? "" : "-${trimprefix(b.platform, "linux/")}"}"
    gpu      = b.gpu
    platform = b.platform
  }]

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

# The gateway reads the base images (their manifests, configs and layers,
# which a push copies into the environment repository): reader on the bases
# repository only.
resource "google_artifact_registry_repository_iam_member" "gateway_bases" {
  project    = var.project
  location   = var.region
  repository = google_artifact_registry_repository.bases.repository_id
  role       = "roles/artifactregistry.reader"
  member     = "serviceAccount:${google_service_account.gateway.email}"
}

# The Dask members may pull the bases too, so that member_container_image
# (what clusters without an environment run) may be one of them.
resource "google_artifact_registry_repository_iam_member" "members_bases" {
  project    = var.project
  location   = var.region
  repository = google_artifact_registry_repository.bases.repository_id
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
