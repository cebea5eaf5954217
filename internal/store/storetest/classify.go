package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/helmr-go/helmr/internal/store"
)

// ClassifyCase is one error of a store's driver and what the store's
// classification must make of it.
type ClassifyCase struct {
	Name string
	// Ctx is the context of the call that failed; nil means a live one.
	Ctx context.Context
	Err error
	// Unavailable and NoSpace say whether the classified error must be
	// store.ErrUnavailable and store.ErrNoSpace.
	Unavailable, NoSpace bool
}

// CheckClassify runs a store's classification function over cases: each
// classified error must be store.ErrUnavailable and store.ErrNoSpace as
// the case says, and still wrap the driver's error.
func CheckClassify(t *testing.T, classify func(context.Context, error) error, cases []ClassifyCase) {
	t.Helper()
	for _, tc := range cases {
		ctx := tc.Ctx
		if ctx == nil {
			ctx = context.Background()
		}
		got := classify(ctx, tc.Err)
		if u := errors.Is(got, store.ErrUnavailable); u != tc.Unavailable {
			t.Errorf("%s: unavailable = %v, want %v (%v)", tc.Name, u, tc.Unavailable, got)
		}
		if n := errors.Is(got, store.ErrNoSpace); n != tc.NoSpace {
			t.Errorf("%s: no space = %v, want %v (%v)", tc.Name, n, tc.NoSpace, got)
		}
		if tc.Err != nil && !errors.Is(got, tc.Err) {
			t.Errorf("%s: %v lost its cause %v", tc.Name, got, tc.Err)
		}
	}
}
