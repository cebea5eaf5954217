package supervisor_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
	"github.com/helmr-go/helmr/internal/supervisor"
)

// A process that outlived the previous control plane and reconnects before
// Recover has adopted it is told to try again (503), not that its token is
// unknown; after Recover an unknown token is refused with 401.
func TestRefusedUntilRecovered(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "helmr.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := supervisor.New(engine.New(st, engine.Options{}), nil, supervisor.Options{SocketPath: filepath.Join(t.TempDir(), "s.sock")})
	t.Cleanup(func() { s.Close(context.Background()) })
	connect := func() (int, string) {
		r := httptest.NewRequest(http.MethodGet, "/session", nil)
		r.Header.Set("Authorization", "Bearer hlmr_proc_"+strings.Repeat("ab", 24))
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w.Code, strings.TrimSpace(w.Body.String())
	}
	if code, body := connect(); code != http.StatusServiceUnavailable || body != "the control plane is starting" {
		t.Fatalf("before Recover: %d %q, want 503 the control plane is starting", code, body)
	}
	if err := s.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if code, body := connect(); code != http.StatusUnauthorized || body != "unknown process token" {
		t.Fatalf("after Recover: %d %q, want 401 unknown process token", code, body)
	}
}
