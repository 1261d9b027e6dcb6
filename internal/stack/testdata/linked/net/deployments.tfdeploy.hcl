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
  inputs           = { name = "v1" }
  deployment_group = deployment_group.auto
}

# Read by the app stack's upstream_input.
publish_output "net_id" {
  value = deployment.prod.net_id
}

# Published from a sensitive output: a reader must take it sensitive.
publish_output "net_secret" {
  value = deployment.prod.net_secret
}
