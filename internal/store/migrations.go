package store

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// ErrSchemaTooNew is returned by a store's Open when the database has
// migrations this binary does not know.
var ErrSchemaTooNew = errors.New("store: the database schema is newer than this helmr; upgrade helmr")

// Migration is one schema migration. Every store has the same versions and
// names, each with its own SQL.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// ReadMigrations lists the files NNNN_name.sql in dir of fsys, in version
// order.
func ReadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		base := path.Base(e)
		num, name, ok := strings.Cut(strings.TrimSuffix(base, ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("store: migration file %s: want NNNN_name.sql", base)
		}
		b, err := fs.ReadFile(fsys, e)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}
