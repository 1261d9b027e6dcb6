variable "token" {
  type      = string
  sensitive = true
}

component "box" {
  source    = "./modules/box"
  inputs    = { secret = var.token }
  providers = {}
}
