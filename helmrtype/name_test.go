package helmrtype

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidNameMatchesNamePattern checks ValidName against the regular
// expression it stands for, on names at and around every rule.
func TestValidNameMatchesNamePattern(t *testing.T) {
	re := regexp.MustCompile(NamePattern)
	cases := []string{
		"", "a", "Z", "0", "reviewer", "my-agent_2.v1", "-a", ".a", "_a", "a-", "a.", "a_",
		"a b", "a/b", "a:b", "é", "aé", "a\n", "\na", "A1-._z9",
		strings.Repeat("a", 127), strings.Repeat("a", 128), strings.Repeat("a", 129),
		"a" + strings.Repeat("-", 127), "a" + strings.Repeat("-", 128),
	}
	for c := byte(0); c < 128; c++ {
		cases = append(cases, string([]byte{c}), "a"+string([]byte{c}))
	}
	for _, s := range cases {
		if got, want := ValidName(s), re.MatchString(s); got != want {
			t.Errorf("ValidName(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}
