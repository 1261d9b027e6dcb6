variable "net_id" {
  type = string
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
