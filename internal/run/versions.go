package run

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/terracehq/terrace/internal/store"
)

// UnfinishedOnVersion counts the runs, in no final status, whose engine
// version is version (as the run records it: its workspace's version when
// it was made, the exact version its plan ran with once it planned): a
// registered version such a run was pinned to must not go while its apply
// may still need to install it (toolversion). It reads through q (inside
// a transaction, its Tx). The runs not final are few: their documents are
// read and looked at here, the same on both stores.
func UnfinishedOnVersion(ctx context.Context, q store.Q, version string) (int, error) {
	docs, err := store.All(ctx, q, func(sc store.Scanner) (string, error) {
		var doc string
		return doc, sc.Scan(&doc)
	}, `SELECT doc FROM runs WHERE status NOT IN `+sqlFinal)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, doc := range docs {
		var r struct {
			TerraformVersion string `json:"terraform_version"`
		}
		if err := json.Unmarshal([]byte(doc), &r); err != nil {
			return 0, fmt.Errorf("decoding a run: %w", err)
		}
		if strings.TrimPrefix(strings.TrimSpace(r.TerraformVersion), "v") == version {
			n++
		}
	}
	return n, nil
}
