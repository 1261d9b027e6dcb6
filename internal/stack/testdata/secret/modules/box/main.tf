variable "secret" {
  type = string
}

# The state holds the input's hash here, marked sensitive, and the input
# itself only where leak declassified it: after the input changes, only
# the previous deployment run's sensitive inputs let the runner mask the
# old value leak's diff prints.
resource "terraform_data" "kept" {
  input = sha256(var.secret)
}

# nonsensitive() makes terraform print the value: only the runner's
# masking keeps it out of the log.
resource "terraform_data" "leak" {
  input = nonsensitive(var.secret)
}
