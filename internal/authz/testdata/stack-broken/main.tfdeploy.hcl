deployment "dev" {
  inputs = { name = "dev" }
}
