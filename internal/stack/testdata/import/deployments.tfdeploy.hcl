deployment_auto_approve "no_destroy" {
  check {
    condition = context.plan.changes.remove == 0
    reason    = "Plan destroys ${context.plan.changes.remove} resources."
  }
}

deployment_group "auto" {
  auto_approve_checks = [deployment_auto_approve.no_destroy]
}

deployment_group "auto_fresh" {
  auto_approve_checks = [deployment_auto_approve.no_destroy]
}

# Migrated: its import blocks are active.
deployment "migrated" {
  inputs           = {}
  deployment_group = deployment_group.auto
  import           = true
}

# New: the import blocks do not apply to it.
deployment "fresh" {
  inputs           = {}
  deployment_group = deployment_group.auto_fresh
}
