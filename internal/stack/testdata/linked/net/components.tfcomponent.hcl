variable "name" {
  type = string
}

component "net" {
  source    = "./modules/echo"
  inputs    = { value = "${var.name}-net" }
  providers = {}
}

output "net_id" {
  type  = string
  value = component.net.value
}

output "net_secret" {
  type      = string
  value     = "${component.net.value}-secret"
  sensitive = true
}
