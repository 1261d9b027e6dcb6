# ORG is replaced by the test's organization.
upstream_input "net" {
  type   = "stack"
  source = "app.terraform.io/ORG/platform/net"
}

deployment_auto_approve "no_destroy" {
  check {
    condition = context.plan.changes.remove == 0
    reason    = "Plan destroys ${context.plan.changes.remove} resources."
  }
}

deployment_group "auto" {
  auto_approve_checks = [deployment_auto_approve.no_destroy]
}

deployment "prod" {
  inputs           = { net_id = upstream_input.net.net_id, net_secret = upstream_input.net.net_secret }
  deployment_group = deployment_group.auto
}
