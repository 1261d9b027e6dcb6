package providerregistry_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/providerregistry/release"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestListsReadTheirPageAtOnce: a page of providers reads its providers'
// versions, a page of versions its versions' platforms, and providers.v1's
// versions list the platforms of the provider's versions, each in one
// statement, as the other lists do: a list of six costs what a list of two
// costs (the requests' own statements, testenv.RequestStatements). Each
// list still shows every provider's versions newest first and every
// version's platforms.
func TestListsReadTheirPageAtOnce(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		f := newFixture(t, e)
		darwinZip := "terraform-provider-toolbox_1.0.0_darwin_arm64.zip"

		cost := func(call func() error) int64 {
			return e.RequestStatements(t, func() {
				if err := call(); err != nil {
					t.Fatal(err)
				}
			})
		}
		// versions are each provider's version IDs, newest first;
		// platforms each version's platform IDs, by os and arch.
		versions := map[string][]string{}
		platforms := map[string][]string{}
		providers := []string{"toolbox"}
		// grow publishes toolbox versions (each with a darwin and a linux
		// zip) and adds providers with two versions each, up to n.
		grow := func(n int) {
			for i := len(versions["toolbox"]); i < n; i++ {
				// 1.0.0, 1.5.0, 1.10.0, …: newest first is not the order
				// of the strings.
				version := fmt.Sprintf("1.%d.0", 5*i)
				v := f.version(t, version, f.key.KeyID())
				versions["toolbox"] = slices.Insert(versions["toolbox"], 0, v.ID)
				darwin := f.platform(t, version, "darwin", "arm64", darwinZip, release.SHA256(f.zips[darwinZip]))
				linux := f.platform(t, version, "linux", "amd64", f.linuxZip, release.SHA256(f.zips[f.linuxZip]))
				platforms[v.ID] = []string{darwin.ID, linux.ID}
				mustPut(t, e, v.Links["shasums-upload"], f.sums)
				mustPut(t, e, v.Links["shasums-sig-upload"], f.sig)
				mustPut(t, e, darwin.Links["provider-binary-upload"], f.zips[darwinZip])
				mustPut(t, e, linux.Links["provider-binary-upload"], f.zips[f.linuxZip])
			}
			for i := len(providers); i < n; i++ {
				name := fmt.Sprintf("tool%d", i)
				if _, err := c.RegistryProviders.Create(ctx, f.org, tfe.RegistryProviderCreateOptions{Name: name, Namespace: f.org, RegistryName: tfe.PrivateRegistry}); err != nil {
					t.Fatal(err)
				}
				providers = append(providers, name)
				for _, version := range []string{"0.9.0", "0.10.0"} {
					pid := tfe.RegistryProviderID{OrganizationName: f.org, RegistryName: tfe.PrivateRegistry, Namespace: f.org, Name: name}
					v, err := c.RegistryProviderVersions.Create(ctx, pid, tfe.RegistryProviderVersionCreateOptions{Version: version, KeyID: f.key.KeyID()})
					if err != nil {
						t.Fatal(err)
					}
					versions[name] = slices.Insert(versions[name], 0, v.ID)
				}
			}
		}
		include := &[]tfe.RegistryProviderIncludeOps{tfe.RegistryProviderVersionsInclude}
		lists := func(n int) (providerList, versionList, protocolList int64) {
			providerList = cost(func() error {
				l, err := c.RegistryProviders.List(ctx, f.org, &tfe.RegistryProviderListOptions{Include: include})
				if err != nil {
					return err
				}
				if len(l.Items) != n {
					return fmt.Errorf("%d providers listed, want %d", len(l.Items), n)
				}
				for _, p := range l.Items {
					var ids []string
					for _, v := range p.RegistryProviderVersions {
						ids = append(ids, v.ID)
						if v.Version == "" {
							return fmt.Errorf("provider %s: version %s is not included", p.Name, v.ID)
						}
					}
					if !slices.Equal(ids, versions[p.Name]) {
						return fmt.Errorf("provider %s lists versions %v, want %v", p.Name, ids, versions[p.Name])
					}
				}
				return nil
			})
			versionList = cost(func() error {
				l, err := c.RegistryProviderVersions.List(ctx, f.pid, nil)
				if err != nil {
					return err
				}
				var ids []string
				for _, v := range l.Items {
					ids = append(ids, v.ID)
					var pls []string
					for _, pl := range v.RegistryProviderPlatforms {
						pls = append(pls, pl.ID)
					}
					if !slices.Equal(pls, platforms[v.ID]) {
						return fmt.Errorf("version %s lists platforms %v, want %v", v.Version, pls, platforms[v.ID])
					}
				}
				if !slices.Equal(ids, versions["toolbox"]) {
					return fmt.Errorf("versions %v, want %v", ids, versions["toolbox"])
				}
				return nil
			})
			protocolList = cost(func() error {
				got := f.protoVersions(t, e.Token)
				if len(got.Versions) != n {
					return fmt.Errorf("providers.v1 offers %d versions, want %d", len(got.Versions), n)
				}
				for _, v := range got.Versions {
					if len(v.Platforms) != 2 {
						return fmt.Errorf("providers.v1 offers %s with platforms %+v, want two", v.Version, v.Platforms)
					}
				}
				return nil
			})
			return providerList, versionList, protocolList
		}

		grow(2)
		p2, v2, proto2 := lists(2)
		grow(6)
		p6, v6, proto6 := lists(6)
		if p6 != p2 {
			t.Errorf("a list of 6 providers costs %d statements, of 2 providers %d", p6, p2)
		}
		if v6 != v2 {
			t.Errorf("a list of 6 versions costs %d statements, of 2 versions %d", v6, v2)
		}
		if proto6 != proto2 {
			t.Errorf("providers.v1 with 6 versions costs %d statements, with 2 versions %d", proto6, proto2)
		}
		t.Logf("statements: providers %d, versions %d, providers.v1 %d", p6, v6, proto6)
	})
}
