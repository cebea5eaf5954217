package helmrclient

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: streams,
// watchdogs and upload writers must all end with their call.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
