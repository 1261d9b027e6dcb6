variable "name" {
  type = string
}

resource "terraform_data" "box" {
  input = var.name
}
