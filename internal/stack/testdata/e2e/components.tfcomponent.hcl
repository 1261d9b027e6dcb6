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
  providers = {}
}

output "app_ids" {
  type  = list(string)
  value = component.app.ids
}
