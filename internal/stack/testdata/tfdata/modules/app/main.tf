variable "network_id" {
  type = string
}

variable "replicas" {
  type = number
}

resource "terraform_data" "app" {
  count = var.replicas
  input = "${var.network_id}/app-${count.index}"
}

output "ids" {
  value = terraform_data.app[*].output
}
