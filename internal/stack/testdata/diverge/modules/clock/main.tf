# Every plan replaces this resource: the deployment never converges.
resource "terraform_data" "tick" {
  triggers_replace = timestamp()
}
