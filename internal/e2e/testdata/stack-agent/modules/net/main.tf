variable "name" {
  type = string
}

resource "terraform_data" "network" {
  input = var.name
}

output "id" {
  value = terraform_data.network.output
}
