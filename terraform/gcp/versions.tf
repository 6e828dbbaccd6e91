terraform {
  # 1.11: write-only arguments (password_wo, secret_data_wo), which keep the
  # database password out of the plan and the state; ephemeral resources
  # (ephemeral "random_password") need 1.10. Variable validations that refer
  # to other variables need 1.9.
  required_version = ">= 1.11"

  required_providers {
    # 6.23 added google_sql_user.password_wo and
    # google_secret_manager_secret_version.secret_data_wo; 6.30 is the floor
    # this module is written against.
    google = {
      source  = "hashicorp/google"
      version = "~> 6.30"
    }
    # 3.7 added the ephemeral random_password.
    random = {
      source  = "hashicorp/random"
      version = "~> 3.7"
    }
  }
}
