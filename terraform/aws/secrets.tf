# Secrets the gateway reads at start: ECS puts their values into the
# container's environment through the task definition's `secrets`, so they
# are never in the task definition's text nor in Terraform's state.
#
# The secrets are created WITHOUT a value: no aws_secretsmanager_secret_version
# here, so nothing secret passes through Terraform. The operator puts the
# values in after apply and forces a new deployment (README.md, "After
# apply"); until then the tasks fail to start with ResourceNotFoundException.
#
# Their names start with gateway-<gateway_id>, never with gateway/: the
# gateway's role (and the Fargate Dask tasks' execution role) may handle
# secrets named gateway/*, which are its clusters' TLS keys.

# The gateway's HTTPS certificate: JSON {"cert": "<PEM chain>", "key": "<PEM key>"}.
resource "aws_secretsmanager_secret" "tls" {
  name_prefix             = "${local.name}-tls-"
  description             = "HTTPS certificate of the gateway ${var.gateway_id}: JSON {\"cert\": \"<PEM chain>\", \"key\": \"<PEM private key>\"}"
  recovery_window_in_days = var.secret_recovery_window_days
  tags                    = local.tags
}

# The OIDC client secret (plain text), for providers that require one for
# the browser sign-in.
resource "aws_secretsmanager_secret" "oidc_client_secret" {
  count = var.oidc_client_secret_required ? 1 : 0

  name_prefix             = "${local.name}-oidc-client-secret-"
  description             = "OIDC client secret of the gateway ${var.gateway_id} (client ${var.oidc_client_id}), as plain text"
  recovery_window_in_days = var.secret_recovery_window_days
  tags                    = local.tags
}

# The package index's URL with its credentials (images.pip_index_url), as
# plain text, e.g. https://user:token@pypi.example.com/simple/.
resource "aws_secretsmanager_secret" "pip_index_url" {
  count = var.pip_index_url_secret ? 1 : 0

  name_prefix             = "${local.name}-pip-index-url-"
  description             = "Package index URL (with credentials) the gateway ${var.gateway_id} fetches wheels from, as plain text: https://<user>:<token>@<host>/simple/"
  recovery_window_in_days = var.secret_recovery_window_days
  tags                    = local.tags
}
