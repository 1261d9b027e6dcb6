variable "name" {
  type = string
}

component "box" {
  source    = "./modules/box"
  inputs    = { name = var.name }
  providers = {}
}
