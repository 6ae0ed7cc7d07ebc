package sqlstate_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/leasehold/leasehold/internal/sqlstate"
)

func TestExpand(t *testing.T) {
	got := sqlstate.Expand("state IN ({pending}, {processing}) AND state <> {dead}, {waiting}, {completed}")
	if want := "state IN (0, 2) AND state <> 4, 1, 3"; got != want {
		t.Fatalf("Expand = %q, want %q", got, want)
	}
}

// stateLiteral is a state column compared with, or set to, a number.
var stateLiteral = regexp.MustCompile(`(?i)state( \+ 0)? *(=|<>|IN \(|<|>) *[0-9]|THEN [0-9] ELSE [0-9]`)

// The backends' SQL names states; it never writes their codes.
func TestBackendsNameStates(t *testing.T) {
	root := filepath.Join("..", "..", "store")
	for _, pattern := range []string{"postgres/*.go", "postgres/*.sql", "postgres/migrations/*.sql", "sqlite/*.go", "sqlite/*.sql", "sqlite/migrations/*.sql"} {
		files, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if matched, _ := filepath.Match("*_test.go", filepath.Base(f)); matched {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range stateLiteral.FindAllString(string(b), -1) {
				t.Errorf("%s: %q writes a state's code; name the state", f, m)
			}
		}
	}
}
