package vcs

import (
	"context"
	"fmt"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

const tokenCols = `t.id, t.oauth_client_id, c.organization_name, t.ssh_key IS NOT NULL, t.service_provider_user, t.created_at`

const tokenFrom = ` FROM oauth_tokens t JOIN oauth_clients c ON c.id = t.oauth_client_id`

func scanToken(sc store.Scanner) (*Token, error) {
	var t Token
	var created int64
	if err := sc.Scan(&t.ID, &t.Client, &t.Organization, &t.HasSSHKey, &t.ServiceProviderUser, &created); err != nil {
		return nil, err
	}
	t.CreatedAt = core.FromMicros(created)
	return &t, nil
}

// ListTokens returns the tokens of an organization's clients, oldest
// first.
func (s *Service) ListTokens(ctx context.Context, org string) ([]*Token, error) {
	if err := s.checkOrganization(ctx, org); err != nil {
		return nil, err
	}
	return store.All(ctx, s.db, scanToken, `SELECT `+tokenCols+tokenFrom+` WHERE c.organization_name = ? ORDER BY t.created_at, t.id`, org)
}

// ClientTokens returns the tokens of a client the caller may read.
func (s *Service) ClientTokens(ctx context.Context, clientID string) ([]*Token, error) {
	c, err := s.GetClient(ctx, clientID)
	if err != nil {
		return nil, err
	}
	return store.All(ctx, s.db, scanToken, `SELECT `+tokenCols+tokenFrom+` WHERE t.oauth_client_id = ? ORDER BY t.created_at, t.id`, c.ID)
}

// loadToken reads a token through q without checking the caller,
// locking its row for the rest of q's transaction when forUpdate.
func (s *Service) loadToken(ctx context.Context, q store.Q, id string, forUpdate bool) (*Token, error) {
	if !core.HasPrefix(id, PrefixToken) {
		return nil, core.NotFound("OAuth token %q not found", id)
	}
	query := `SELECT ` + tokenCols + tokenFrom + ` WHERE t.id = ?`
	if forUpdate {
		query += store.ForUpdate(q)
	}
	t, err := scanToken(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("OAuth token %q not found", id)
	}
	return t, err
}

// GetToken returns a token the caller may read.
func (s *Service) GetToken(ctx context.Context, id string) (*Token, error) {
	t, err := s.loadToken(ctx, s.db, id, false)
	if err != nil {
		return nil, err
	}
	if err := visible(ctx, t.Organization, fmt.Sprintf("OAuth token %q", id)); err != nil {
		return nil, err
	}
	return t, nil
}

// manageToken checks, before a change's transaction, that the caller may
// change a token.
func (s *Service) manageToken(ctx context.Context, id string) error {
	t, err := s.GetToken(ctx, id)
	if err != nil {
		return err
	}
	return requireManage(ctx, t.Organization)
}

// UpdateToken sets or replaces a token's SSH key.
func (s *Service) UpdateToken(ctx context.Context, id string, o TokenOptions) (*Token, error) {
	if err := s.manageToken(ctx, id); err != nil {
		return nil, err
	}
	var out *Token
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		t, err := s.loadToken(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if o.SSHKey != nil {
			if err := validSSHKey(*o.SSHKey); err != nil {
				return err
			}
			sealed, err := s.Keys.SealString(SSHKeyColumn.Purpose, *o.SSHKey)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE oauth_tokens SET ssh_key = ? WHERE id = ?`, sealed, t.ID); err != nil {
				return redact(err)
			}
			t.HasSSHKey = true
		}
		out = t
		return nil
	})
	return out, err
}

// DeleteToken removes a token; the OnDeleteToken hooks drop every
// reference to it in the same transaction.
func (s *Service) DeleteToken(ctx context.Context, id string) error {
	if err := s.manageToken(ctx, id); err != nil {
		return err
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		t, err := s.loadToken(ctx, tx, id, true)
		if err != nil {
			return err
		}
		for _, fn := range s.OnDeleteToken {
			if err := fn(ctx, tx, []string{t.ID}); err != nil {
				return fmt.Errorf("deleting OAuth token %s: %w", t.ID, err)
			}
		}
		_, err = tx.Exec(ctx, `DELETE FROM oauth_tokens WHERE id = ?`, t.ID)
		return err
	})
}

// Credential is what the server needs to reach a repository host for a
// token: it holds the token string, which must never be logged or
// returned.
type Credential struct {
	TokenID      string
	Organization string
	Provider     Provider
	APIURL       string
	HTTPURL      string
	Token        string
	// OrganizationScoped and Projects say which workspaces may use it.
	OrganizationScoped bool
	Projects           []string
}

// String never shows the token.
func (c Credential) String() string {
	return "vcs.Credential{TokenID: " + c.TokenID + ", Provider: " + string(c.Provider) + ", APIURL: " + c.APIURL + ", Token: [redacted]}"
}

// GoString is String for %#v.
func (c Credential) GoString() string { return c.String() }

// UsableBy reports whether a workspace of project may use the token.
func (c *Credential) UsableBy(org, project string) bool {
	if c.Organization != org {
		return false
	}
	if c.OrganizationScoped {
		return true
	}
	for _, p := range c.Projects {
		if p == project {
			return true
		}
	}
	return false
}

// Credential returns a token's credential without checking the caller:
// for the server acting for the system (fetching a workspace's
// repository), and after a caller's own check (Connectable). q may be a
// transaction.
func (s *Service) Credential(ctx context.Context, q store.Q, tokenID string) (*Credential, error) {
	var c Credential
	var sealed string
	var expires *int64
	err := q.QueryRow(ctx, `SELECT t.id, c.organization_name, c.service_provider, c.api_url, c.http_url, t.token, c.organization_scoped, t.expires_at`+
		tokenFrom+` WHERE t.id = ?`, tokenID).Scan(&c.TokenID, &c.Organization, &c.Provider, &c.APIURL, &c.HTTPURL, &sealed, &c.OrganizationScoped, &expires)
	if store.IsNoRows(err) {
		return nil, core.NotFound("OAuth token %q not found", tokenID)
	}
	if err != nil {
		return nil, err
	}
	if _, inTx := q.(*store.Tx); !inTx && expires != nil && core.Now().Add(renewBefore).After(core.FromMicros(*expires)) {
		// Renewed outside any transaction: the host is asked.
		if sealed, err = s.renew(ctx, tokenID); err != nil {
			return nil, err
		}
	}
	if c.Token, err = s.Keys.OpenString(TokenColumn.Purpose, sealed); err != nil {
		return nil, err
	}
	c.Projects, err = store.All(ctx, q, func(sc store.Scanner) (string, error) {
		var id string
		return id, sc.Scan(&id)
	}, `SELECT p.project_id FROM oauth_client_projects p JOIN oauth_tokens t ON t.oauth_client_id = p.oauth_client_id WHERE t.id = ?`, tokenID)
	return &c, err
}

// Repositories lists, by owner/name, the repositories token tokenID reads
// at its host, for a caller who may read the organization's VCS providers
// (who picks a repository to connect; the connection itself checks the
// token's project scope and the repository again).
func (s *Service) Repositories(ctx context.Context, tokenID string) ([]string, error) {
	tok, err := s.GetToken(ctx, tokenID)
	if err != nil {
		return nil, err
	}
	cred, err := s.Credential(ctx, s.db, tok.ID)
	if err != nil {
		return nil, err
	}
	h, err := s.host(cred)
	if err != nil {
		return nil, err
	}
	names, err := h.Repositories(ctx)
	if err != nil {
		return nil, hostError("listing the repositories of "+cred.Provider.DisplayName(), err)
	}
	return names, nil
}
