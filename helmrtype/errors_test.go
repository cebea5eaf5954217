package helmrtype

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorIsCode(t *testing.T) {
	err := fmt.Errorf("get session: %w", &Error{Code: CodeNotFound, Message: "no such Session"})
	if !errors.Is(err, CodeNotFound) {
		t.Errorf("errors.Is(err, CodeNotFound) = false; want true")
	}
	if errors.Is(err, CodeConflict) {
		t.Errorf("errors.Is(err, CodeConflict) = true; want false")
	}
	if !errors.Is(err, &Error{Code: CodeNotFound}) {
		t.Errorf("errors.Is(err, &Error{not_found}) = false; want true")
	}
	if got := CodeOf(err); got != CodeNotFound {
		t.Errorf("CodeOf = %q; want not_found", got)
	}
}
