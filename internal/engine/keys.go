package engine

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// apiKeyPrefix begins every API key's secret.
const apiKeyPrefix = "hlmr_sk_"

// keyPrefixLen is how much of a secret is kept to recognise the key:
// apiKeyPrefix and 4 of its 48 random hex digits.
const keyPrefixLen = len(apiKeyPrefix) + 4

// maxKeyName bounds an API key's name.
const maxKeyName = 128

// metaBootstrapKey records that the first API key was made.
const metaBootstrapKey = "bootstrap_api_key"

// lastAdminReason is the conflict detail of a refused revocation of the
// last admin key.
const lastAdminReason = "last_admin_key"

func apiKeyView(k *store.APIKey) helmrtype.APIKey {
	return helmrtype.APIKey{ID: k.ID, Name: k.Name, Role: helmrtype.Role(k.Role), Prefix: k.Prefix, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

// newAPIKey returns a new key record with the role and its secret.
func (e *Engine) newAPIKey(name string, role helmrtype.Role) (*store.APIKey, string) {
	secret, hash := NewSecret(apiKeyPrefix)
	return &store.APIKey{ID: NewID(), Name: name, Hash: hash, Role: string(role), Prefix: secret[:keyPrefixLen], CreatedAt: e.Now()}, secret
}

// CreateAPIKey stores a new admin API key and returns its plaintext,
// shown once. It makes the keys of helmr dev, helmr server --api-key-file
// and tests; POST /v1/keys uses CreateKey.
func (e *Engine) CreateAPIKey(ctx context.Context, name string) (string, error) {
	k, secret := e.newAPIKey(name, helmrtype.RoleAdmin)
	err := e.store.Update(ctx, func(tx store.Tx) error { return tx.InsertAPIKey(ctx, k) })
	return secret, err
}

// BootstrapAPIKey creates the control plane's first API key, an admin key,
// once: created is false (and key empty) when it was made before.
func (e *Engine) BootstrapAPIKey(ctx context.Context, name string) (key string, created bool, err error) {
	k, secret := e.newAPIKey(name, helmrtype.RoleAdmin)
	err = e.store.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.GetMeta(ctx, metaBootstrapKey); err == nil {
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		created = true
		if err := tx.InsertAPIKey(ctx, k); err != nil {
			return err
		}
		return tx.PutMeta(ctx, metaBootstrapKey, "created")
	})
	if err != nil || !created {
		return "", false, err
	}
	return secret, true, nil
}

// CreateKey makes a named API key with a role and returns it with its
// secret, which is shown only this once. There is no idempotent replay:
// a replay could not show the secret again.
func (e *Engine) CreateKey(ctx context.Context, req helmrtype.APIKeyCreateRequest) (*helmrtype.APIKeyCreated, error) {
	name := strings.TrimSpace(req.Name)
	if name == "" || len(name) > maxKeyName || !utf8.ValidString(name) {
		return nil, invalid("name is required: up to %d bytes of text that tell people what the key is for", maxKeyName)
	}
	if !req.Role.Valid() {
		return nil, &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "role must be one of admin, operator, responder and viewer",
			Details: map[string]any{"role": string(req.Role)}}
	}
	k, secret := e.newAPIKey(name, req.Role)
	if err := e.store.Update(ctx, func(tx store.Tx) error { return tx.InsertAPIKey(ctx, k) }); err != nil {
		return nil, err
	}
	e.log.Info("API key created", "key", k.ID, "name", k.Name, "role", k.Role)
	return &helmrtype.APIKeyCreated{APIKey: apiKeyView(k), Secret: secret}, nil
}

// ListKeys returns a page of the API keys, revoked ones included, oldest
// first; never their secrets.
func (e *Engine) ListKeys(ctx context.Context, cursor string, limit int) (*helmrtype.APIKeyPage, error) {
	limit, err := pageLimit(limit, 100)
	if err != nil {
		return nil, err
	}
	rows, err := read(ctx, e.store, func(tx store.Tx) ([]store.APIKey, error) { return tx.ListAPIKeys(ctx, cursor, limit+1) })
	if err != nil {
		return nil, err
	}
	out := &helmrtype.APIKeyPage{Keys: []helmrtype.APIKey{}}
	rows, out.NextCursor = trimPage(rows, limit, func(k *store.APIKey) string { return k.ID })
	for i := range rows {
		out.Keys = append(out.Keys, apiKeyView(&rows[i]))
	}
	return out, nil
}

// RevokeKey revokes an API key: from its next request on, on every node,
// it authenticates no more. Revoking a revoked key answers it unchanged.
// The last admin key that is not revoked cannot be revoked (conflict), so
// that the control plane always has a key that can make keys.
func (e *Engine) RevokeKey(ctx context.Context, id string) (*helmrtype.APIKey, error) {
	var out helmrtype.APIKey
	err := e.store.Update(ctx, func(tx store.Tx) error {
		k, err := tx.GetAPIKey(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return notFound("API key", id)
		}
		if err != nil {
			return err
		}
		if k.RevokedAt == nil && k.Role == string(helmrtype.RoleAdmin) {
			admins, err := tx.LockActiveAPIKeys(ctx, string(helmrtype.RoleAdmin))
			if err != nil {
				return err
			}
			if len(admins) == 1 && admins[0] == id {
				return &helmrtype.Error{Code: helmrtype.CodeConflict,
					Message: "this is the last admin key: create another admin key before revoking it",
					Details: map[string]any{"reason": lastAdminReason, "id": id}}
			}
		}
		if k.RevokedAt == nil {
			now := e.Now()
			if err := tx.RevokeAPIKey(ctx, id, now); err != nil {
				return err
			}
			k.RevokedAt = &now
		}
		out = apiKeyView(k)
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.keysMu.Lock()
	e.keysGen++
	e.keys.Range(func(hash, v any) bool {
		if v.(*store.APIKey).ID == id {
			e.keys.Delete(hash)
		}
		return true
	})
	e.keysMu.Unlock()
	e.log.Info("API key revoked", "key", id)
	return &out, nil
}

// Authenticate returns the API key whose plaintext is secret, unless it
// was revoked. A single node keeps the keys it has seen in memory: it is
// the only one that revokes them, and RevokeKey forgets them. Several
// nodes read the key from the store on every request (one read by a
// unique index), so that a revocation on any node holds on all of them
// from their next request.
func (e *Engine) Authenticate(ctx context.Context, secret string) (*store.APIKey, error) {
	hash := HashSecret(secret)
	var gen uint64
	if e.node == "" {
		if k, ok := e.keys.Load(hash); ok {
			return k.(*store.APIKey), nil
		}
		e.keysMu.Lock()
		gen = e.keysGen
		e.keysMu.Unlock()
	}
	k, err := read(ctx, e.store, func(tx store.Tx) (*store.APIKey, error) { return tx.GetAPIKeyByHash(ctx, hash) })
	if errors.Is(err, store.ErrNotFound) {
		return nil, helmrtype.Errorf(helmrtype.CodeUnauthorized, "the API key is not valid")
	}
	if err != nil {
		return nil, err
	}
	if k.RevokedAt != nil {
		return nil, helmrtype.Errorf(helmrtype.CodeUnauthorized, "the API key was revoked")
	}
	if !helmrtype.Role(k.Role).Valid() {
		return nil, helmrtype.Errorf(helmrtype.CodeUnauthorized, "the API key has no known role")
	}
	if e.node == "" {
		e.keysMu.Lock()
		if e.keysGen == gen {
			e.keys.Store(hash, k)
		}
		e.keysMu.Unlock()
	}
	return k, nil
}

// ActiveKey returns the API key with the ID unless it was revoked or is
// unknown (unauthorized). The console checks its session's key with it on
// every request, so that a revocation ends console sessions too.
func (e *Engine) ActiveKey(ctx context.Context, id string) (*store.APIKey, error) {
	k, err := read(ctx, e.store, func(tx store.Tx) (*store.APIKey, error) { return tx.GetAPIKey(ctx, id) })
	if errors.Is(err, store.ErrNotFound) {
		return nil, helmrtype.Errorf(helmrtype.CodeUnauthorized, "the API key is not valid")
	}
	if err != nil {
		return nil, err
	}
	if k.RevokedAt != nil {
		return nil, helmrtype.Errorf(helmrtype.CodeUnauthorized, "the API key was revoked")
	}
	if !helmrtype.Role(k.Role).Valid() {
		return nil, helmrtype.Errorf(helmrtype.CodeUnauthorized, "the API key has no known role")
	}
	return k, nil
}
