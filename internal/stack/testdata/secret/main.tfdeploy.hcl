deployment "prod" {
  inputs = { token = "s3cr3t-hunter2" }
}
