// Package clienv is what every helmr CLI command shares: the global flags,
// the standard streams, the API client built from them, input flags, output
// rendering, and the exit codes that scripts rely on.
package clienv

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/helmr-go/helmr/helmrclient"
)

// DefaultAPIURL is the control plane a command talks to when neither
// --api-url nor HELMR_API_URL says otherwise.
const DefaultAPIURL = "http://127.0.0.1:7070"

// Environment variables the global flags fall back to.
const (
	EnvAPIURL = "HELMR_API_URL"
	EnvAPIKey = "HELMR_API_KEY"
)

// Streams are the standard input, output and error of a command.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// StdStreams returns the process's standard streams.
func StdStreams() Streams { return Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr} }

// Globals holds the global flags and streams. Commands receive a pointer to
// it when the tree is built and read it when they run, after flag parsing.
type Globals struct {
	// APIURL is --api-url; empty means HELMR_API_URL, then the current
	// profile, then DefaultAPIURL.
	APIURL string
	// APIKey is --api-key; empty means HELMR_API_KEY, then the current
	// profile's key (with its URL only).
	APIKey string
	// JSON is --json: print the API object as JSON instead of text.
	JSON bool
	// Streams are the command's standard streams.
	Streams Streams
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// ConfigFile is the config file with the profiles; empty means
	// ConfigPath (the user's config directory).
	ConfigFile string

	profileRead bool
	profile     *Profile
	profileName string
	profileErr  error
}

// getenv reads the environment through g.Getenv.
func (g *Globals) getenv(k string) string {
	if g.Getenv != nil {
		return g.Getenv(k)
	}
	return os.Getenv(k)
}

// ResolvedAPIURL is the control plane URL in force: the flag, the
// environment, the current profile, or the default.
func (g *Globals) ResolvedAPIURL() string {
	url, _, _ := g.resolve()
	return url
}

// ResolvedAPIKey is the API key in force: the flag, the environment, or
// the current profile's key when the URL in force is that profile's ("" if
// none).
func (g *Globals) ResolvedAPIKey() string {
	_, key, _ := g.resolve()
	return key
}

// Resolved is the URL and key in force and the name of the profile that
// gave either ("" when flags or the environment gave both, or no profile
// is current). An unreadable config file is an error only when a profile
// was needed.
func (g *Globals) Resolved() (url, key, profile string, err error) {
	url, key, profile = g.resolve()
	if url == "" || key == "" {
		if _, err = g.currentProfile(); err != nil {
			return "", "", "", err
		}
	}
	return url, key, profile, nil
}

// resolve applies the order flags, environment, current profile; the URL
// falls back to DefaultAPIURL. A profile's key is used only with its own
// URL, so that a key never goes to a server it was not saved for.
func (g *Globals) resolve() (url, key, profile string) {
	url, key = g.APIURL, g.APIKey
	if url == "" {
		url = strings.TrimSpace(g.getenv(EnvAPIURL))
	}
	if key == "" {
		key = strings.TrimSpace(g.getenv(EnvAPIKey))
	}
	if url == "" || key == "" {
		if p, _ := g.currentProfile(); p != nil {
			if url == "" {
				url, profile = p.APIURL, g.profileName
			}
			if key == "" && strings.TrimSuffix(url, "/") == strings.TrimSuffix(p.APIURL, "/") {
				key, profile = p.APIKey, g.profileName
			}
		}
	}
	if url == "" {
		url = DefaultAPIURL
	}
	return url, key, profile
}

// ConfigFilePath is the config file in force: g.ConfigFile, else
// ConfigPath.
func (g *Globals) ConfigFilePath() (string, error) {
	if g.ConfigFile != "" {
		return g.ConfigFile, nil
	}
	return ConfigPath()
}

// currentProfile reads the current profile once per command; nil when
// none is current.
func (g *Globals) currentProfile() (*Profile, error) {
	if g.profileRead {
		return g.profile, g.profileErr
	}
	g.profileRead = true
	path, err := g.ConfigFilePath()
	if err != nil {
		g.profileErr = err
		return nil, err
	}
	c, err := LoadConfig(path)
	if err != nil {
		g.profileErr = fmt.Errorf("the helmr config file: %w", err)
		return nil, g.profileErr
	}
	if p, ok := c.Profiles[c.Current]; ok {
		g.profile, g.profileName = &p, c.Current
	}
	return g.profile, nil
}

// Client builds an API client from the global flags. It is a usage error
// (exit 2) when no API key is set.
func (g *Globals) Client(opts ...helmrclient.Option) (*helmrclient.Client, error) {
	url, key, _, err := g.Resolved()
	if err != nil {
		return nil, err
	}
	if key == "" {
		return nil, Usagef("no API key: pass --api-key, set %s, or save a profile with helmr login (helmr dev saves one)", EnvAPIKey)
	}
	opts = append([]helmrclient.Option{helmrclient.WithUserAgent("helmr-cli")}, opts...)
	return helmrclient.New(url, key, opts...), nil
}
