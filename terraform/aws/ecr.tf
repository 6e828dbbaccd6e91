# Images. Two repositories:
#
#   environments  the gateway pushes users' Python environments here
#                 (images.repository, tags env-<content hash>) and Dask
#                 members pull them.
#   bases         you put the base images environments are built on here
#                 (images.bases, tags such as 3.11, 3.11-gpu): the gateway
#                 reads them and pushes each environment as the base's layers
#                 plus one layer per wheel. See README.md, "Base images".
#
# Both use the same encryption (AES256), which ECR's blob mounting needs to
# share the bases' layers with the environments without copying them.

resource "aws_ecr_repository" "environments" {
  name = "${local.name}/environments"
  # Tags are content hashes, but the same tag is pushed again when a build
  # is repeated (a failed or lost push, a rebuild after an expired image):
  # IMMUTABLE would refuse those pushes.
  image_tag_mutability = "MUTABLE"
  force_delete         = var.ecr_force_delete
  tags                 = local.tags

  image_scanning_configuration {
    scan_on_push = true
  }

  encryption_configuration {
    encryption_type = "AES256"
  }
}

resource "aws_ecr_lifecycle_policy" "environments" {
  repository = aws_ecr_repository.environments.name
  policy     = local.expire_untagged_policy
}

resource "aws_ecr_repository" "bases" {
  name = "${local.name}/bases"
  # A base is refreshed (a Python or Dask patch release) by pushing the
  # same tag again; pin one by digest in base_images to stop that.
  image_tag_mutability = "MUTABLE"
  force_delete         = var.ecr_force_delete
  tags                 = local.tags

  image_scanning_configuration {
    scan_on_push = true
  }

  encryption_configuration {
    encryption_type = "AES256"
  }
}

resource "aws_ecr_lifecycle_policy" "bases" {
  repository = aws_ecr_repository.bases.name
  policy     = local.expire_untagged_policy
}

locals {
  # Untagged images are those a newer push of the same tag replaced:
  # nothing refers to them by tag any more.
  expire_untagged_policy = jsonencode({
    rules = [{
      rulePriority = 1
      description  = "Expire untagged images (replaced by a newer push of their tag) after 7 days"
      selection = {
        tagStatus   = "untagged"
        countType   = "sinceImagePushed"
        countUnit   = "days"
        countNumber = 7
      }
      action = { type = "expire" }
    }]
  })

  # images.bases, as the gateway reads it: a base without an image is
  # <bases repository>:<python>[-gpu][-arm64].
  image_bases = [for b in var.base_images : {
    python   = b.python
    image    = b.image != null ? b.image : "${aws_ecr_repository.bases.repository_url}:${b.python}${b.gpu ? "-gpu" : ""}${b.platform == "linux/amd64" ? "" : "-${trimprefix(b.platform, "linux/")}"}"
    gpu      = b.gpu
    platform = b.platform
  }]
}
