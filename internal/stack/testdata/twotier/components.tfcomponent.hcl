required_providers {
  random = {
    source  = "hashicorp/random"
    version = "~> 3.6"
  }
}

provider "random" "this" {
  config {}
}

variable "prefix" {
  type = string
}

variable "replicas" {
  type    = number
  default = 1
}

component "network" {
  source = "./modules/network"
  inputs = {
    name = "${var.prefix}-net"
  }
  providers = {}
}

component "app" {
  source = "./modules/app"
  inputs = {
    network_id = component.network.id
    replicas   = var.replicas
  }
  providers = {
    random = provider.random.this
  }
}

output "app_id" {
  type  = string
  value = component.app.id
}
