# No auto-approval: every plan with changes waits for an operator.
deployment "prod" {
  inputs = { name = "prod" }
}
