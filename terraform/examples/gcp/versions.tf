terraform {
  # The module needs 1.11: write-only arguments keep the database password
  # out of the plan and the state.
  required_version = ">= 1.11"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "~> 6.30"
    }
    random = {
      source  = "hashicorp/random"
      version = "~> 3.7"
    }
  }

  # Keep the state somewhere shared and durable for real deployments, e.g.:
  # backend "gcs" {
  #   bucket = "my-terraform-state"
  #   prefix = "gateway"
  # }
}
