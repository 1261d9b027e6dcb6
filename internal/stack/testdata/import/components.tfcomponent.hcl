component "box" {
  source    = "./modules/box"
  inputs    = {}
  providers = {}
}

output "box_id" {
  type  = string
  value = component.box.id
}
