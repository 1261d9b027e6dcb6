variable "value" {
  type = string
}

resource "terraform_data" "echo" {
  input = var.value
}

output "value" {
  value = terraform_data.echo.output
}
