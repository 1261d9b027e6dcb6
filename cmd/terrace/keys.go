package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/idtoken"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/server"
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
	cmd.AddCommand(rotate, reencryptCmd(), rotateIdentityCmd())
	return cmd
}

func rotateIdentityCmd() *cobra.Command {
	var o sealedStore
	var retire time.Duration
	cmd := &cobra.Command{
		Use:   "rotate-identity",
		Short: "Make a new key to sign workload identity tokens with, without downtime",
		Long: `Make a new key to sign workload identity tokens with (the OIDC issuer's
key, /.well-known/jwks).

Running servers sign with the new key at once; the key set keeps
publishing the replaced key until --retire-after has passed since this
rotation, so that tokens it signed still verify (give at least the site's
plan and apply time limits together). Replaced keys older than that are
dropped by this rotation.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			db, keys, closeDB, err := o.open(cmd)
			if err != nil {
				return err
			}
			defer closeDB()
			id, dropped, err := idtoken.Rotate(cmd.Context(), db, keys, retire)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "workload identity tokens are signed with key %s from now on; %d replaced key(s) dropped\n", id, dropped)
			return nil
		},
	}
	o.flags(cmd.Flags())
	cmd.Flags().DurationVar(&retire, "retire-after", 24*time.Hour, "how long a replaced key stays in the key set")
	return cmd
}

// sealedStore is what the key commands that read sealed data open: the
// server's store and its keyring, named by the server's own flags.
type sealedStore struct {
	dataDir, database, kek string
}

func (o *sealedStore) flags(f *pflag.FlagSet) {
	f.StringVar(&o.dataDir, "data-dir", ".terrace", "the server's data dir")
	f.StringVar(&o.database, "database", "", "postgres://… URL, or a SQLite file (default <data-dir>/terrace.db)")
	f.StringVar(&o.kek, "kek", "", "the key-encryption key (base64 or hex; default <data-dir>/kek)")
}

// open reads the flags' environment twins, refuses to go on without a
// key-encryption key (the keyring would make a new one), and opens the
// store and the keyring; done closes the store.
func (o *sealedStore) open(cmd *cobra.Command) (db *store.DB, keys *seal.Keyring, done func(), err error) {
	if err := envTwins(cmd.Flags()); err != nil {
		return nil, nil, nil, err
	}
	o.dataDir = cmp.Or(o.dataDir, ".terrace")
	o.database = cmp.Or(o.database, filepath.Join(o.dataDir, "terrace.db"))
	if o.kek == "" {
		if _, err := os.Stat(filepath.Join(o.dataDir, seal.KEKFile)); err != nil {
			return nil, nil, nil, fmt.Errorf("no key-encryption key: give --kek (TERRACE_KEK or TERRACE_KEK_FILE), or --data-dir holding %s", seal.KEKFile)
		}
	}
	if db, err = store.Open(cmd.Context(), o.database); err != nil {
		return nil, nil, nil, err
	}
	if keys, err = seal.Open(cmd.Context(), db, seal.Source{Configured: o.kek, DataDir: o.dataDir}); err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	return db, keys, func() { db.Close() }, nil
}

func reencryptCmd() *cobra.Command {
	var o sealedStore
	var blobs string
	cmd := &cobra.Command{
		Use:   "reencrypt",
		Short: "Re-seal every secret and blob under a new data key, while servers run",
		Long: `Re-seal every sealed secret and blob under a new data key.

A new data key (wrapped by the current key-encryption key) is stored, then
every sealed column value and blob that is sealed under an older data key
is opened and sealed again under the new one, in small batches. Servers may
keep running: they load the new data key when they first meet a value
sealed with it, and seal under it from then on. Stopped part-way, the same
command resumes with the same new key; once it finishes, a later run makes
another.

The key-encryption key is --kek (TERRACE_KEK, TERRACE_KEK_FILE) or
<data-dir>/kek, as for the server.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			db, keys, closeDB, err := o.open(cmd)
			if err != nil {
				return err
			}
			defer closeDB()
			bs, err := blob.Open(ctx, cmp.Or(blobs, filepath.Join(o.dataDir, "blobs")))
			if err != nil {
				return err
			}
			defer bs.Close()
			bs.Seal(keys)
			id, resumed, err := keys.Target(ctx, db)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if resumed {
				fmt.Fprintf(out, "resuming the re-encryption to data key %s\n", id)
			} else {
				fmt.Fprintf(out, "new data key %s\n", id)
			}
			rows, err := keys.Reseal(ctx, db, server.SealedColumns())
			if err != nil {
				return fmt.Errorf("%w (run the command again to resume)", err)
			}
			n, err := bs.Reseal(ctx)
			if err != nil {
				return fmt.Errorf("%w (run the command again to resume)", err)
			}
			if err := seal.Finish(ctx, db, id); err != nil {
				return err
			}
			fmt.Fprintf(out, "re-sealed %d value(s) and %d blob(s) under data key %s\n", rows, n, id)
			return nil
		},
	}
	o.flags(cmd.Flags())
	cmd.Flags().StringVar(&blobs, "blobs", "", "blob folder or s3://… URL, as given to the server (default <data-dir>/blobs)")
	return cmd
}
