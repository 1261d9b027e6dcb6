variable "marker" {
  type = string
}

component "marker" {
  source    = "./modules/marker"
  inputs    = { path = var.marker }
  providers = {}
}

output "seen" {
  type  = bool
  value = component.marker.seen
}
