deployment "global" {
  inputs = {
    regions = { "us-east-1" = 3, "eu-west-1" = 2 }
  }
}
