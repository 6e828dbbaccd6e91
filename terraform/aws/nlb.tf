# The gateway's single public port: a network load balancer passing raw TCP
# on 443 to the tasks' port 8443.
#
# TLS is NOT terminated here but by the gateway itself: it reads each
# connection's ClientHello and passes Dask connections whose server name is
# daskgateway-<cluster> (or <cluster>.<tls_cluster_domain>), still
# encrypted, to that cluster's scheduler, which authenticates the client
# with the cluster's own certificate. A TLS listener (or an ALB) would end
# those sessions at the load balancer and break this SNI routing and the
# end-to-end mutual TLS; so the listener is TCP and the certificate lives
# in the gateway (Secrets Manager, see secrets.tf).

resource "aws_lb" "gateway" {
  name                             = local.short_name
  internal                         = var.nlb_internal
  load_balancer_type               = "network"
  subnets                          = local.nlb_subnet_ids
  enable_cross_zone_load_balancing = true
  tags                             = local.tags

  lifecycle {
    precondition {
      condition     = length(local.nlb_subnet_ids) > 0
      error_message = "The load balancer has no subnets: with vpc_id set, give public_subnet_ids (internet-facing) or set nlb_internal = true (it then uses private_subnet_ids)."
    }
  }
}

resource "aws_lb_target_group" "gateway" {
  name        = "${local.short_name}-tg"
  port        = 8443
  protocol    = "TCP"
  target_type = "ip"
  vpc_id      = local.vpc_id
  # IP targets over TCP do not preserve client addresses by default: turn it
  # on, so that the tasks' security group filters on allowed_cidrs and the
  # gateway rate-limits failed logins per real client.
  preserve_client_ip = "true"
  # Dask clients hold long connections; a replaced task gets this long to
  # let them go before it is cut off.
  deregistration_delay = "60"
  tags                 = local.tags

  # One-time dashboard links (gateway dashboard) are redeemed on the replica
  # that made them; browser sessions are shared through the database.
  stickiness {
    enabled = true
    type    = "source_ip"
  }

  # TCP: the load balancer cannot judge the gateway's certificate, and any
  # process that accepts on 8443 is the gateway (it serves HTTPS, with
  # GET /api/health answering without authentication, on that port).
  health_check {
    enabled             = true
    protocol            = "TCP"
    port                = "traffic-port"
    interval            = 10
    timeout             = 5
    healthy_threshold   = 2
    unhealthy_threshold = 2
  }
}

resource "aws_lb_listener" "gateway" {
  load_balancer_arn = aws_lb.gateway.arn
  port              = 443
  protocol          = "TCP"
  tags              = local.tags

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.gateway.arn
  }
}
