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
  # The test replaces this with a file in its temporary folder.
  inputs           = { marker = "MARKER" }
  deployment_group = deployment_group.auto
}
