required_providers {
  terraform = {
    source = "terraform.io/builtin/terraform"
  }
}

variable "regions" {
  type = map(number)
}

# One provider configuration per region, passed to the site of that
# region.
provider "terraform" "region" {
  for_each = var.regions
}

component "site" {
  for_each = var.regions
  source   = "./modules/site"
  inputs = {
    region = each.key
    zones  = each.value
  }
  providers = {
    terraform = provider.terraform.region[each.key]
  }
}

component "summary" {
  source = "./modules/site"
  inputs = {
    region = join(",", [for k, s in component.site : s.id])
    zones  = length(component.site)
  }
  providers = {
    terraform = provider.terraform.region["us-east-1"]
  }
}

output "sites" {
  type  = map(string)
  value = { for k, s in component.site : k => s.id }
}
