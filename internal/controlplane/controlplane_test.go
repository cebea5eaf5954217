package controlplane

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestOneControlPlanePerDataDir(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cp, err := Open(ctx, Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, Config{DataDir: dir}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open: %v", err)
	}
	cp.Close(ctx)
	cp2, err := Open(ctx, Config{DataDir: dir})
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	cp2.Close(ctx)
	if _, err := Open(ctx, Config{DataDir: dir, Database: "mysql://x"}); err == nil {
		t.Fatal("unsupported database accepted")
	}
	// A refused configuration leaves the directory free.
	cp3, err := Open(ctx, Config{DataDir: dir})
	if err != nil {
		t.Fatalf("open after a refused configuration: %v", err)
	}
	cp3.Close(ctx)
}

func TestMain(m *testing.M) {
	// Opening and closing a control plane leaves no goroutine behind.
	goleak.VerifyTestMain(m)
}
