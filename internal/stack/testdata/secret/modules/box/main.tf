variable "secret" {
  type = string
}

resource "terraform_data" "kept" {
  input = var.secret
}

# nonsensitive() makes terraform print the value: only the runner's
# masking keeps it out of the log.
resource "terraform_data" "leak" {
  input = nonsensitive(var.secret)
}
