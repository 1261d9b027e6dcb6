package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

func keysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Manage the keys that encrypt secrets and state at rest"}
	var dataDir, database, kek, newKEK string
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Re-wrap the data keys under a new key-encryption key, without downtime",
		Long: `Re-wrap the data keys under a new key-encryption key (KEK).

Secrets and blobs stay sealed under the same data keys, so running servers
carry on; start each server with the new key when it next restarts.

The current key is --kek (TERRACE_KEK, TERRACE_KEK_FILE) or <data-dir>/kek.
The new key is --new-kek (TERRACE_NEW_KEK, TERRACE_NEW_KEK_FILE); when the
current key lives in the data dir and no new key is given, one is generated
and replaces <data-dir>/kek.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := envTwins(cmd.Flags()); err != nil {
				return err
			}
			ctx := cmd.Context()
			dataDir = cmp.Or(dataDir, ".terrace")
			database = cmp.Or(database, filepath.Join(dataDir, "terrace.db"))
			kekPath := filepath.Join(dataDir, seal.KEKFile)
			var old seal.KEK
			var err error
			if kek != "" {
				old, err = seal.ParseKEK(kek)
			} else {
				old, err = seal.ReadKEKFile(kekPath)
				if errors.Is(err, os.ErrNotExist) {
					err = fmt.Errorf("no current key: give --kek (TERRACE_KEK or TERRACE_KEK_FILE), or --data-dir holding %s", seal.KEKFile)
				}
			}
			if err != nil {
				return err
			}
			var next seal.KEK
			generated := false
			switch {
			case newKEK != "":
				if next, err = seal.ParseKEK(newKEK); err != nil {
					return fmt.Errorf("--new-kek: %w", err)
				}
			case kek == "":
				next, generated = seal.GenerateKEK(), true
			default:
				return errors.New("the current key was given by --kek: give the new one with --new-kek (TERRACE_NEW_KEK or TERRACE_NEW_KEK_FILE)")
			}
			db, err := store.Open(ctx, database)
			if err != nil {
				return err
			}
			defer db.Close()
			nextPath := filepath.Join(dataDir, seal.KEKNextFile)
			if generated {
				// Written first: a server started between the two steps
				// finds whichever key the database holds.
				if err := seal.WriteKEKFile(nextPath, next); err != nil {
					return err
				}
			}
			n, err := seal.Rotate(ctx, db, old, next)
			if err != nil {
				return err
			}
			if generated {
				if err := os.Rename(nextPath, kekPath); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "re-wrapped %d data key(s) under key %s, now in %s\n", n, next.ID, kekPath)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "re-wrapped %d data key(s) under key %s; start servers with the new key (--kek / TERRACE_KEK)\n", n, next.ID)
			return nil
		},
	}
	f := rotate.Flags()
	f.StringVar(&dataDir, "data-dir", ".terrace", "the server's data dir")
	f.StringVar(&database, "database", "", "postgres://… URL, or a SQLite file (default <data-dir>/terrace.db)")
	f.StringVar(&kek, "kek", "", "the current key-encryption key (base64 or hex; default <data-dir>/kek)")
	f.StringVar(&newKEK, "new-kek", "", "the new key-encryption key (base64 or hex; generated into <data-dir>/kek when the current key is there)")
	cmd.AddCommand(rotate)
	return cmd
}
