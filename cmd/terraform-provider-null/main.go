// Command terraform-provider-null is Terrace's own stand-in for the
// hashicorp/null provider, written with terraform-plugin-framework.
//
// The machines Terrace is tested on have no internet access, and no real
// HashiCorp provider can be built from the Go module proxy, so configurations
// that use null_resource (go-tfe's run fixtures do) could not even pass
// `terraform init`. This binary offers the same schema as the real provider
// (null_resource and null_data_source, schema version 0), so existing
// configurations and states keep working, and it is served from a filesystem
// mirror: see internal/testprovider and the README section "Offline providers".
//
// It lives under cmd/ rather than internal/ because it is a real, installable
// plugin binary: users can `go build` it and put it in their own mirror.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
)

// version is the release this binary claims to be. It is a real hashicorp/null
// release number so that constraints such as `version = "~> 3.2"` resolve
// against a mirror that holds only this build. Override with
// -ldflags "-X main.version=…".
var version = "3.2.4"

func main() {
	debug := flag.Bool("debug", false, "run in debug mode (for delve); prints TF_REATTACH_PROVIDERS")
	flag.Parse()

	err := providerserver.Serve(context.Background(), newProvider(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/hashicorp/null",
		Debug:   *debug,
		// The real provider speaks protocol 5; keeping it means Terraform
		// 0.12 and later, and every OpenTofu release, can run this binary.
		ProtocolVersion: 5,
	})
	if err != nil {
		log.Fatal(err)
	}
}
