locals {
  base = "acme"
}

deployment_auto_approve "no_destroy" {
  check {
    condition = context.plan.changes.remove == 0
    reason    = "Plan destroys ${context.plan.changes.remove} resources."
  }
}

deployment_group "canary" {
  auto_approve_checks = [deployment_auto_approve.no_destroy]
}

deployment "dev" {
  inputs = {
    prefix = "${local.base}-dev"
  }
}

deployment "staging" {
  inputs = {
    prefix   = "${local.base}-staging"
    replicas = 2
  }
  deployment_group = deployment_group.canary
}

deployment "prod" {
  inputs = {
    prefix   = "${local.base}-prod"
    replicas = 3
  }
}
