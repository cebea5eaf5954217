package version

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/helmr-go/helmr", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	in := FromBuildInfo(bi)
	if in != (Info{Version: "v0.3.0", Commit: "abc123", CommitTime: "2026-01-02T03:04:05Z", Modified: true, GoVersion: "go1.26.8", Module: "github.com/helmr-go/helmr"}) {
		t.Fatalf("Info %+v", in)
	}
	if got, want := in.String(), "helmr v0.3.0, commit abc123 (modified), built with go1.26.8"; got != want {
		t.Errorf("String %q; want %q", got, want)
	}
	bare := FromBuildInfo(&debug.BuildInfo{GoVersion: "go1.26.8"})
	if got, want := bare.String(), "helmr (devel), commit unknown, built with go1.26.8"; got != want {
		t.Errorf("String %q; want %q", got, want)
	}
	if FromBuildInfo(nil).Version != "unknown" {
		t.Error("nil build info")
	}
	if cur := Current(); cur.GoVersion != runtime.Version() {
		t.Errorf("Current %+v; want Go %s", cur, runtime.Version())
	}
}
