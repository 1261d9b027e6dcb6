# A change that needs two plan/apply cycles: "seen" reads whether the
# marker file exists, and only the first apply creates it (after "seen"
# is applied, through depends_on). The second plan sees the file and
# updates "seen"; the third plan is empty.
variable "path" {
  type = string
}

resource "terraform_data" "seen" {
  input = fileexists(var.path)
}

resource "terraform_data" "writer" {
  depends_on = [terraform_data.seen]
  input      = var.path

  provisioner "local-exec" {
    command = "touch \"$MARKER\""
    environment = {
      MARKER = var.path
    }
  }
}

output "seen" {
  value = terraform_data.seen.output
}
