component "clock" {
  source    = "./modules/clock"
  inputs    = {}
  providers = {}
}
