package clienv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// Profiles. A profile is a saved control plane URL and API key, kept in
// the user's config file (ConfigPath): helmr login saves one, helmr dev
// saves "dev", helmr profile use picks the current one. The global flags,
// then HELMR_API_URL and HELMR_API_KEY, win over the current profile.

// DevProfile is the name of the profile helmr dev saves.
const DevProfile = "dev"

// DefaultProfile is the name helmr login saves to without --profile.
const DefaultProfile = "default"

// Profile is one saved control plane and its API key.
type Profile struct {
	// APIURL is the control plane URL, without /v1.
	APIURL string `json:"api_url"`
	// APIKey is the API key sent as a bearer token.
	APIKey string `json:"api_key"`
}

// Config is the CLI's config file: the profiles by name and the current one.
type Config struct {
	// Current names the profile in force; empty when there is none.
	Current string `json:"current,omitempty"`
	// Profiles are the saved profiles by name.
	Profiles map[string]Profile `json:"profiles"`
}

// ConfigPath is the config file: DIR/helmr/config.json in the user's
// config directory (os.UserConfigDir: $XDG_CONFIG_HOME, else ~/.config).
func ConfigPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("the user config directory: %w", err)
	}
	return filepath.Join(dir, "helmr", "config.json"), nil
}

// LoadConfig reads the config file at path; a missing file is an empty
// Config.
func LoadConfig(path string) (*Config, error) {
	c := &Config{Profiles: map[string]Profile{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if c.Profiles == nil {
		c.Profiles = map[string]Profile{}
	}
	return c, nil
}

// Save writes c to path, atomically, as a file of mode 0600 in a
// directory of mode 0700 (the file holds API keys).
func (c *Config) Save(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".config-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// Names returns the profile names, sorted.
func (c *Config) Names() []string {
	names := make([]string, 0, len(c.Profiles))
	for n := range c.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// CheckProfileName refuses an empty name or one with spaces or slashes.
func CheckProfileName(name string) error {
	if name == "" || len(name) > 64 || strings.ContainsAny(name, " \t\n/\\") {
		return Usagef("profile name %q: want 1–64 characters without spaces or slashes", name)
	}
	return nil
}

// KeyPrefix is what a person may see of an API key: its first characters
// and an ellipsis, never the whole key.
func KeyPrefix(key string) string {
	const n = 12
	if key == "" {
		return ""
	}
	if utf8.RuneCountInString(key) <= n+4 {
		r := []rune(key)
		return string(r[:min(len(r), 4)]) + "…"
	}
	return string([]rune(key)[:n]) + "…"
}

// SaveProfile saves the profile name in the config file at path (the
// default file when path is empty). It becomes current when makeCurrent
// is set or no profile is current; the result says whether it is current.
func SaveProfile(path, name string, p Profile, makeCurrent bool) (bool, error) {
	if err := CheckProfileName(name); err != nil {
		return false, err
	}
	if path == "" {
		var err error
		if path, err = ConfigPath(); err != nil {
			return false, err
		}
	}
	c, err := LoadConfig(path)
	if err != nil {
		return false, err
	}
	c.Profiles[name] = p
	if _, ok := c.Profiles[c.Current]; makeCurrent || !ok {
		c.Current = name
	}
	return c.Current == name, c.Save(path)
}
