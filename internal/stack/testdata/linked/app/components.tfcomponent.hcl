variable "net_id" {
  type = string
}

variable "net_secret" {
  type      = string
  sensitive = true
}

component "app" {
  source    = "./modules/echo"
  inputs    = { value = "app-on-${var.net_id}" }
  providers = {}
}

output "app" {
  type  = string
  value = component.app.value
}
