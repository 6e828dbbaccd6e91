# Environment images: the gateway pushes users' Python environments here
# (tags env-<content hash>) and Dask members pull them.

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
  policy = jsonencode({
    rules = [{
      rulePriority = 1
      description  = "Expire untagged images (layers of replaced pushes) after 7 days"
      selection = {
        tagStatus   = "untagged"
        countType   = "sinceImagePushed"
        countUnit   = "days"
        countNumber = 7
      }
      action = { type = "expire" }
    }]
  })
}
