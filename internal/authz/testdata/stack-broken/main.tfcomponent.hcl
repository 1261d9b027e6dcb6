# A variable without a type: the configuration fails with a diagnostic.
variable "name" {
  default = "x"
}

component "box" {
  source    = "./box"
  inputs    = { name = var.name }
  providers = {}
}
