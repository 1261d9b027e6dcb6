variable "prefix" {
  type = string
}

component "net" {
  source = "./modules/net"
  inputs = {
    name = "${var.prefix}-net"
  }
  providers = {}
}
