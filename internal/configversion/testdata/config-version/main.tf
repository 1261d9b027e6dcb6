# A minimal configuration uploaded by the configuration-version tests.
resource "terraform_data" "foo" {
  input = "archive me"
}
