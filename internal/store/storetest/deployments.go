package storetest

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/helmr-go/helmr/internal/store"
)

func testMeta(t *testing.T, s store.Store) {
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.GetMeta(ctx, "missing")
		wantErr(t, "GetMeta(missing)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "PutMeta(a)", tx.PutMeta(ctx, "a", "one"))
		wantOK(t, "PutMeta(b)", tx.PutMeta(ctx, "b", ""))
		v, err := tx.GetMeta(ctx, "a")
		if err != nil || v != "one" {
			t.Errorf("GetMeta(a) in the writing Update = %q, %v; want one", v, err)
		}
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "PutMeta(a) again", tx.PutMeta(ctx, "a", "two"))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for key, want := range map[string]string{"a": "two", "b": ""} {
			v, err := tx.GetMeta(ctx, key)
			if err != nil || v != want {
				t.Errorf("GetMeta(%s) = %q, %v; want %q", key, v, err, want)
			}
		}
		return nil
	})
}

func testAPIKeys(t *testing.T, s store.Store) {
	k := &store.APIKey{ID: "key-1", Name: "dev laptop", Hash: "sha256:aaaa", Role: "operator", Prefix: "hlmr_sk_ab12", CreatedAt: at(1)}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertAPIKey", tx.InsertAPIKey(ctx, k))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetAPIKeyByHash(ctx, k.Hash)
		if err != nil {
			t.Fatalf("GetAPIKeyByHash: %v", err)
		}
		want := *k
		want.CreatedAt = stored(k.CreatedAt)
		check(t, "APIKey", *got, want)
		_, err = tx.GetAPIKeyByHash(ctx, "sha256:bbbb")
		wantErr(t, "GetAPIKeyByHash(missing)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		err := tx.InsertAPIKey(ctx, &store.APIKey{ID: "key-2", Name: "other", Hash: k.Hash, Role: "admin", CreatedAt: at(2)})
		wantErr(t, "InsertAPIKey(same hash)", err, store.ErrDuplicate)
		err = tx.InsertAPIKey(ctx, &store.APIKey{ID: k.ID, Name: "other", Hash: "sha256:cccc", Role: "admin", CreatedAt: at(2)})
		wantErr(t, "InsertAPIKey(same id)", err, store.ErrDuplicate)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.GetAPIKeyByHash(ctx, "sha256:cccc")
		wantErr(t, "GetAPIKeyByHash(refused duplicate)", err, store.ErrNotFound)
		got, err := tx.GetAPIKeyByHash(ctx, k.Hash)
		if err != nil || got.ID != k.ID || got.Name != k.Name {
			t.Errorf("GetAPIKeyByHash after refused duplicates = %+v, %v; want the original", got, err)
		}
		return nil
	})
}

// testAPIKeyRevocation covers listing, revoking and counting keys by role.
func testAPIKeyRevocation(t *testing.T, s store.Store) {
	keys := []*store.APIKey{
		{ID: "key-3", Name: "ci", Hash: "h3", Role: "viewer", Prefix: "p3", CreatedAt: at(3)},
		{ID: "key-1", Name: "first", Hash: "h1", Role: "admin", Prefix: "p1", CreatedAt: at(1)},
		{ID: "key-2", Name: "second", Hash: "h2", Role: "admin", CreatedAt: at(2)},
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, k := range keys {
			wantOK(t, "InsertAPIKey", tx.InsertAPIKey(ctx, k))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ks, err := tx.ListAPIKeys(ctx, "", 100)
		if err != nil {
			t.Fatalf("ListAPIKeys: %v", err)
		}
		var ids []string
		for _, k := range ks {
			ids = append(ids, k.ID)
		}
		checkIDs(t, "ListAPIKeys", ids, []string{"key-1", "key-2", "key-3"})
		if len(ks) == 3 {
			want := *keys[0]
			want.CreatedAt = stored(want.CreatedAt)
			check(t, "listed APIKey", ks[2], want)
		}
		ks, err = tx.ListAPIKeys(ctx, "key-1", 1)
		if err != nil || len(ks) != 1 || ks[0].ID != "key-2" {
			t.Errorf("ListAPIKeys(key-1, 1) = %+v, %v; want key-2", ks, err)
		}
		got, err := tx.GetAPIKey(ctx, "key-2")
		if err != nil || got.Hash != "h2" || got.RevokedAt != nil {
			t.Errorf("GetAPIKey(key-2) = %+v, %v", got, err)
		}
		_, err = tx.GetAPIKey(ctx, "key-missing")
		wantErr(t, "GetAPIKey(missing)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		ids, err := tx.LockActiveAPIKeys(ctx, "admin")
		if err != nil {
			t.Fatalf("LockActiveAPIKeys: %v", err)
		}
		checkIDs(t, "LockActiveAPIKeys(admin)", ids, []string{"key-1", "key-2"})
		wantOK(t, "RevokeAPIKey", tx.RevokeAPIKey(ctx, "key-2", at(5)))
		wantErr(t, "RevokeAPIKey(missing)", tx.RevokeAPIKey(ctx, "key-missing", at(5)), store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		// A second revocation keeps the first time.
		wantOK(t, "RevokeAPIKey(again)", tx.RevokeAPIKey(ctx, "key-2", at(7)))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetAPIKeyByHash(ctx, "h2")
		if err != nil || got.RevokedAt == nil || !got.RevokedAt.Equal(stored(at(5))) {
			t.Errorf("GetAPIKeyByHash(revoked) = %+v, %v; want revoked at %v", got, err, stored(at(5)))
		}
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		ids, err := tx.LockActiveAPIKeys(ctx, "admin")
		if err != nil {
			t.Fatalf("LockActiveAPIKeys: %v", err)
		}
		checkIDs(t, "LockActiveAPIKeys(admin) after a revocation", ids, []string{"key-1"})
		return nil
	})
}

func testDeployments(t *testing.T, s store.Store) {
	d := &store.Deployment{
		ID:         "dep-1",
		Digest:     "sha256:1111",
		Manifest:   raw(`{"version":"helmr.manifest.v1","agents":[{"id":"a"}]}`),
		BinaryPath: "/var/lib/helmr/deployments/dep-1/agent",
		CreatedAt:  at(3),
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertDeployment", tx.InsertDeployment(ctx, d))
		return nil
	})
	want := *d
	want.CreatedAt = stored(d.CreatedAt)
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetDeployment(ctx, d.ID)
		if err != nil {
			t.Fatalf("GetDeployment: %v", err)
		}
		check(t, "GetDeployment", *got, want)
		got, err = tx.GetDeploymentByDigest(ctx, d.Digest, "")
		if err != nil {
			t.Fatalf("GetDeploymentByDigest: %v", err)
		}
		check(t, "GetDeploymentByDigest", *got, want)
		_, err = tx.GetDeployment(ctx, "dep-missing")
		wantErr(t, "GetDeployment(missing)", err, store.ErrNotFound)
		_, err = tx.GetDeploymentByDigest(ctx, "sha256:missing", "")
		wantErr(t, "GetDeploymentByDigest(missing)", err, store.ErrNotFound)
		_, err = tx.GetDeploymentByDigest(ctx, d.Digest, "sha256:other-sources")
		wantErr(t, "GetDeploymentByDigest(other sources)", err, store.ErrNotFound)
		return nil
	})
	// The same binary with sources is another Deployment.
	withSrc := *d
	withSrc.ID, withSrc.SourcesDigest, withSrc.CreatedAt = "dep-src", "sha256:aaaa", at(4)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertDeployment(same binary, with sources)", tx.InsertDeployment(ctx, &withSrc))
		return nil
	})
	wantSrc := withSrc
	wantSrc.CreatedAt = stored(withSrc.CreatedAt)
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetDeploymentByDigest(ctx, d.Digest, "sha256:aaaa")
		if err != nil {
			t.Fatalf("GetDeploymentByDigest(with sources): %v", err)
		}
		check(t, "GetDeploymentByDigest(with sources)", *got, wantSrc)
		got, err = tx.GetDeployment(ctx, "dep-src")
		if err != nil {
			t.Fatalf("GetDeployment(with sources): %v", err)
		}
		check(t, "GetDeployment(with sources)", *got, wantSrc)
		got, err = tx.GetDeploymentByDigest(ctx, d.Digest, "")
		if err != nil {
			t.Fatalf("GetDeploymentByDigest(without sources): %v", err)
		}
		check(t, "GetDeploymentByDigest(without sources) after one with sources", *got, want)
		ds, err := tx.ListDeployments(ctx, "", 10)
		if err != nil || len(ds) != 2 {
			t.Fatalf("ListDeployments = %v, %v; want 2", ds, err)
		}
		check(t, "listed deployment with sources", ds[0], wantSrc)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		dup := *d
		dup.ID = "dep-2"
		wantErr(t, "InsertDeployment(same digest)", tx.InsertDeployment(ctx, &dup), store.ErrDuplicate)
		dup = withSrc
		dup.ID = "dep-3"
		wantErr(t, "InsertDeployment(same digest and sources)", tx.InsertDeployment(ctx, &dup), store.ErrDuplicate)
		dup = *d
		dup.Digest = "sha256:2222"
		wantErr(t, "InsertDeployment(same id)", tx.InsertDeployment(ctx, &dup), store.ErrDuplicate)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.GetDeployment(ctx, "dep-2")
		wantErr(t, "GetDeployment(refused duplicate)", err, store.ErrNotFound)
		got, err := tx.GetDeployment(ctx, d.ID)
		if err != nil {
			t.Fatalf("GetDeployment: %v", err)
		}
		check(t, "GetDeployment after refused duplicates", *got, want)
		return nil
	})
}

func testListDeployments(t *testing.T, s store.Store) {
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ds, err := tx.ListDeployments(ctx, "", 10)
		if err != nil || len(ds) != 0 {
			t.Errorf("ListDeployments on an empty store = %d deployments, %v; want none", len(ds), err)
		}
		return nil
	})
	// Inserted out of order; IDs sort by creation.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, i := range []int{3, 1, 5, 2, 4} {
			d := &store.Deployment{ID: fmt.Sprintf("dep-%d", i), Digest: fmt.Sprintf("sha256:%d", i),
				Manifest: raw(`{}`), BinaryPath: "bin", CreatedAt: at(i)}
			wantOK(t, "InsertDeployment", tx.InsertDeployment(ctx, d))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct {
			before string
			limit  int
			want   []string
		}{
			{"", 10, []string{"dep-5", "dep-4", "dep-3", "dep-2", "dep-1"}},
			{"", 2, []string{"dep-5", "dep-4"}},
			{"dep-4", 2, []string{"dep-3", "dep-2"}},
			{"dep-2", 10, []string{"dep-1"}},
			{"dep-1", 10, nil},
		} {
			ds, err := tx.ListDeployments(ctx, c.before, c.limit)
			if err != nil {
				t.Errorf("ListDeployments(%q, %d): %v", c.before, c.limit, err)
				continue
			}
			checkIDs(t, fmt.Sprintf("ListDeployments(%q, %d)", c.before, c.limit), deploymentIDs(ds), c.want)
		}
		ds, err := tx.ListDeployments(ctx, "", 1)
		if err != nil || len(ds) != 1 {
			t.Fatalf("ListDeployments(\"\", 1) = %v, %v", ds, err)
		}
		check(t, "listed deployment", ds[0], store.Deployment{ID: "dep-5", Digest: "sha256:5", Manifest: raw(`{}`), BinaryPath: "bin", CreatedAt: stored(at(5))})
		return nil
	})
}

// testBinaries checks deployment binaries kept in the store.
func testBinaries(t *testing.T, s store.Store) {
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.GetBinary(ctx, "sha256:none")
		wantErr(t, "GetBinary(missing)", err, store.ErrNotFound)
		wantOK(t, "PutBinary", tx.PutBinary(ctx, "sha256:one", data))
		wantOK(t, "PutBinary again", tx.PutBinary(ctx, "sha256:one", []byte("other")))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetBinary(ctx, "sha256:one")
		wantOK(t, "GetBinary", err)
		if !bytes.Equal(got, data) {
			t.Errorf("GetBinary returned %d bytes, not the %d stored", len(got), len(data))
		}
		return nil
	})
}
