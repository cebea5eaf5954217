package controlplane

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/helmr-go/helmr/helmrtype"
)

// The sandbox is not the point of these tests: UnsafeNoSandbox (which
// applies only where bubblewrap cannot run) lets them run on such a host.

func TestOneControlPlanePerDataDir(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cp, err := Open(ctx, Config{DataDir: dir, UnsafeNoSandbox: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, Config{DataDir: dir, UnsafeNoSandbox: true}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open: %v", err)
	}
	cp.Close(ctx)
	cp2, err := Open(ctx, Config{DataDir: dir, UnsafeNoSandbox: true})
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	cp2.Close(ctx)
	if _, err := Open(ctx, Config{DataDir: dir, Database: "mysql://x"}); err == nil {
		t.Fatal("unsupported database accepted")
	}
	// A refused configuration leaves the directory free.
	cp3, err := Open(ctx, Config{DataDir: dir, UnsafeNoSandbox: true})
	if err != nil {
		t.Fatalf("open after a refused configuration: %v", err)
	}
	cp3.Close(ctx)
}

func TestMain(m *testing.M) {
	// Opening and closing a control plane leaves no goroutine behind.
	goleak.VerifyTestMain(m)
}

// TestHistoryRetentionConfig: a negative retention is refused with
// invalid_request; a positive one runs the expiry in the background, which
// ends with the control plane (TestMain checks for leaked goroutines).
func TestHistoryRetentionConfig(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := Open(ctx, Config{DataDir: dir, HistoryRetention: -time.Second}); !errors.Is(err, helmrtype.CodeInvalidRequest) {
		t.Fatalf("negative retention: %v, want invalid_request", err)
	}
	cp, err := Open(ctx, Config{DataDir: dir, HistoryRetention: 200 * time.Millisecond, UnsafeNoSandbox: true})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a few runs of the expiry
	if err := cp.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := expiryInterval(30 * 24 * time.Hour); got != time.Minute {
		t.Errorf("interval of 30d = %v, want 1m", got)
	}
	if got := expiryInterval(time.Millisecond); got != 100*time.Millisecond {
		t.Errorf("interval of 1ms = %v, want 100ms", got)
	}
	if got := expiryInterval(10 * time.Second); got != 5*time.Second {
		t.Errorf("interval of 10s = %v, want 5s", got)
	}
}
