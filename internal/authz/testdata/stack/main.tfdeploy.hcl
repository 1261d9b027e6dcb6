# No auto-approval: the plan waits for an operator, so the run and its
# plan step stay put while the matrix asks about them.
deployment "dev" {
  inputs = { name = "dev" }
}
