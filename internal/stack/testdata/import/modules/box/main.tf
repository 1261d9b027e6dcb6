# Adopt the box a workspace already manages (a migration into the stack).
import {
  to = terraform_data.box
  id = "migrated-box"
}

resource "terraform_data" "box" {}

output "id" {
  value = terraform_data.box.id
}
