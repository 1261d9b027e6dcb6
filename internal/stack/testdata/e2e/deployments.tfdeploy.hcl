deployment_auto_approve "no_destroy" {
  check {
    condition = context.plan.changes.remove == 0
    reason    = "Plan destroys ${context.plan.changes.remove} resources."
  }
}

deployment_group "auto" {
  auto_approve_checks = [deployment_auto_approve.no_destroy]
}

# Staging's group auto-approves plans that destroy nothing.
deployment_group "canary" {
  auto_approve_checks = [deployment_auto_approve.no_destroy]
}

deployment "dev" {
  inputs = {
    prefix = "dev"
  }
  deployment_group = deployment_group.auto
}

deployment "staging" {
  inputs = {
    prefix = "staging"
  }
  deployment_group = deployment_group.canary
}

deployment "prod" {
  inputs = {
    prefix   = "prod"
    replicas = 2
  }
}
