variable "name" {
  default = "x"
}

resource "terraform_data" "stray" {}

component "a" {
  source    = "./a"
  inputs    = { name = var.name }
  providers = {}
}
