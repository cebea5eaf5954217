//go:build linux

package local_test

import (
	"os"
	"testing"

	"github.com/helmr-go/helmr/internal/computer"
	"github.com/helmr-go/helmr/internal/computer/computertest"
	"github.com/helmr-go/helmr/internal/computer/local"
)

func TestMain(m *testing.M) {
	computertest.Main()
	escapeHelper()
	parkCounter()
	os.Exit(m.Run())
}

// needSandbox skips a test of the bubblewrap sandbox where it cannot run
// (bwrap missing, user namespaces refused), naming why.
func needSandbox(t *testing.T) {
	t.Helper()
	p, err := local.New(local.Options{Dir: t.TempDir(), Unsafe: true, CgroupName: "helmr-test"})
	if err != nil {
		t.Fatal(err)
	}
	p.Cleanup()
	if why := p.Unsandboxed(); why != "" {
		t.Skipf("needs the bubblewrap sandbox, which cannot run here: %s", why)
	}
}

func TestBubblewrap(t *testing.T) {
	needSandbox(t)
	computertest.Run(t, func(t *testing.T) computer.Provider {
		p, err := local.New(local.Options{Dir: t.TempDir(), CgroupName: "helmr-test"})
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind() != local.KindBubblewrap {
			t.Fatalf("kind %s", p.Kind())
		}
		return p
	}, true)
}

func TestUnsafe(t *testing.T) {
	computertest.Run(t, func(t *testing.T) computer.Provider {
		p, err := local.New(local.Options{Dir: t.TempDir(), Unsafe: true, Bwrap: "no-such-bwrap", CgroupName: "helmr-test"})
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind() != local.KindUnsafe {
			t.Fatalf("kind %s", p.Kind())
		}
		return p
	}, false)
}

func TestNoSandboxIsRefused(t *testing.T) {
	if _, err := local.New(local.Options{Dir: t.TempDir(), Bwrap: "no-such-bwrap"}); err == nil {
		t.Fatal("a host without bubblewrap was accepted without Unsafe")
	}
}
