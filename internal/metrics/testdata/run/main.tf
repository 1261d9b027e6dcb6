resource "terraform_data" "a" {
  input = "metrics"
}

resource "terraform_data" "b" {
  input = terraform_data.a.output
}
