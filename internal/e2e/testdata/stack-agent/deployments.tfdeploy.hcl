deployment_auto_approve "no_destroy" {
  check {
    condition = context.plan.changes.remove == 0
    reason    = "Plan destroys ${context.plan.changes.remove} resources."
  }
}

deployment_group "auto" {
  auto_approve_checks = [deployment_auto_approve.no_destroy]
}

deployment "private" {
  inputs = {
    prefix = "private"
  }
  deployment_group = deployment_group.auto
}
