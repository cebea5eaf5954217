// Package clienv is what every helmr CLI command shares: the global flags,
// the standard streams, the API client built from them, input flags, output
// rendering, and the exit codes that scripts rely on.
package clienv

import (
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
	// APIURL is --api-url; empty means HELMR_API_URL, then DefaultAPIURL.
	APIURL string
	// APIKey is --api-key; empty means HELMR_API_KEY.
	APIKey string
	// JSON is --json: print the API object as JSON instead of text.
	JSON bool
	// Streams are the command's standard streams.
	Streams Streams
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// getenv reads the environment through g.Getenv.
func (g *Globals) getenv(k string) string {
	if g.Getenv != nil {
		return g.Getenv(k)
	}
	return os.Getenv(k)
}

// ResolvedAPIURL is the control plane URL in force: the flag, the
// environment, or the default.
func (g *Globals) ResolvedAPIURL() string {
	if g.APIURL != "" {
		return g.APIURL
	}
	if v := strings.TrimSpace(g.getenv(EnvAPIURL)); v != "" {
		return v
	}
	return DefaultAPIURL
}

// ResolvedAPIKey is the API key in force: the flag or the environment ("" if
// neither).
func (g *Globals) ResolvedAPIKey() string {
	if g.APIKey != "" {
		return g.APIKey
	}
	return strings.TrimSpace(g.getenv(EnvAPIKey))
}

// Client builds an API client from the global flags. It is a usage error
// (exit 2) when no API key is set.
func (g *Globals) Client(opts ...helmrclient.Option) (*helmrclient.Client, error) {
	key := g.ResolvedAPIKey()
	if key == "" {
		return nil, Usagef("no API key: pass --api-key or set %s", EnvAPIKey)
	}
	opts = append([]helmrclient.Option{helmrclient.WithUserAgent("helmr-cli")}, opts...)
	return helmrclient.New(g.ResolvedAPIURL(), key, opts...), nil
}
