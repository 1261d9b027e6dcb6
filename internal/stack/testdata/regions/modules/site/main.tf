terraform {
  required_providers {
    terraform = { source = "terraform.io/builtin/terraform" }
  }
}

variable "region" {
  type = string
}

variable "zones" {
  type = number
}

resource "terraform_data" "site" {
  input = "${var.region}/${var.zones}"
}

output "id" {
  value = terraform_data.site.output
}
