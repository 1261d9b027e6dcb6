deployment_auto_approve "always" {
  check {
    condition = context.success
    reason    = "The plan failed."
  }
}

deployment_group "auto" {
  auto_approve_checks = [deployment_auto_approve.always]
}

deployment "only" {
  inputs           = {}
  deployment_group = deployment_group.auto
}
