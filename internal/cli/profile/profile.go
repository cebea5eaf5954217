// Package profile holds helmr login and the helmr profile commands (list
// and use): saved control plane URLs and API keys in the user's config
// file, the current one used when no flag or environment variable says
// otherwise.
package profile

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// NewLogin returns `helmr login`.
func NewLogin(g *clienv.Globals) *cobra.Command {
	var (
		url, name string
		noVerify  bool
	)
	cmd := &cobra.Command{
		Use:   "login --url URL --api-key KEY [--profile NAME]",
		Short: "Save a control plane URL and API key as a profile and make it current",
		Long: "helmr login checks the API key against the control plane at URL (unless --no-verify), then\n" +
			"saves both as profile NAME (default \"default\") in the user's config directory\n" +
			"(helmr/config.json, mode 0600) and makes it the current profile. Commands use the current\n" +
			"profile when neither --api-url/--api-key nor HELMR_API_URL/HELMR_API_KEY is set.",
		Args: clienv.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			url = strings.TrimSuffix(strings.TrimSpace(url), "/")
			key := strings.TrimSpace(g.APIKey)
			switch {
			case url == "":
				return clienv.Usagef("--url is required")
			case !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://"):
				return clienv.Usagef("--url %q: want http:// or https://", url)
			case key == "":
				return clienv.Usagef("--api-key is required")
			}
			if err := clienv.CheckProfileName(name); err != nil {
				return err
			}
			if !noVerify {
				c := helmrclient.New(url, key, helmrclient.WithUserAgent("helmr-cli"))
				if _, err := c.Deployments.List(cmd.Context(), helmrclient.ListOptions{Limit: 1}); err != nil {
					return fmt.Errorf("the key does not work at %s (nothing saved; --no-verify saves anyway): %w", url, err)
				}
			}
			path, err := g.ConfigFilePath()
			if err != nil {
				return err
			}
			if _, err := clienv.SaveProfile(path, name, clienv.Profile{APIURL: url, APIKey: key}, true); err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(profileView(name, clienv.Profile{APIURL: url, APIKey: key}, true))
			}
			fmt.Fprintf(g.Streams.Out, "Saved profile %s (%s, key %s) in %s; it is current.\n", name, url, clienv.KeyPrefix(key), path)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "the control plane URL (required)")
	f.StringVar(&name, "profile", clienv.DefaultProfile, "the profile's name")
	f.BoolVar(&noVerify, "no-verify", false, "save without checking the key against the control plane")
	return cmd
}

// New returns the "profile" command and its verbs.
func New(g *clienv.Globals) *cobra.Command {
	cmd := clienv.Group(&cobra.Command{
		Use:   "profile",
		Short: "List the saved profiles and pick the current one",
	})
	cmd.AddCommand(newList(g), newUse(g))
	return cmd
}

// view is a profile as list --json prints it: never the whole key.
type view struct {
	Name      string `json:"name"`
	Current   bool   `json:"current"`
	APIURL    string `json:"api_url"`
	KeyPrefix string `json:"api_key_prefix"`
}

func profileView(name string, p clienv.Profile, current bool) view {
	return view{Name: name, Current: current, APIURL: p.APIURL, KeyPrefix: clienv.KeyPrefix(p.APIKey)}
}

func newList(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the saved profiles: name, URL and the first characters of the key",
		Args:  clienv.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := g.ConfigFilePath()
			if err != nil {
				return err
			}
			c, err := clienv.LoadConfig(path)
			if err != nil {
				return err
			}
			views := []view{}
			for _, n := range c.Names() {
				views = append(views, profileView(n, c.Profiles[n], n == c.Current))
			}
			if g.JSON {
				return g.PrintJSON(map[string]any{"profiles": views})
			}
			t := clienv.NewTable(g.Streams.Out, "CURRENT", "NAME", "URL", "KEY")
			for _, v := range views {
				cur := ""
				if v.Current {
					cur = "*"
				}
				t.Row(cur, v.Name, v.APIURL, v.KeyPrefix)
			}
			if err := t.Flush(); err != nil {
				return err
			}
			if len(views) == 0 {
				fmt.Fprintln(g.Streams.Err, "No profiles: save one with helmr login (helmr dev saves \"dev\").")
			}
			return nil
		},
	}
}

func newUse(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "use NAME",
		Short: "Make a saved profile the current one",
		Args:  clienv.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := g.ConfigFilePath()
			if err != nil {
				return err
			}
			c, err := clienv.LoadConfig(path)
			if err != nil {
				return err
			}
			p, ok := c.Profiles[args[0]]
			if !ok {
				return clienv.Exitf(clienv.ExitNotFound, "no profile %q (have: %s)", args[0], strings.Join(c.Names(), ", "))
			}
			c.Current = args[0]
			if err := c.Save(path); err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(profileView(args[0], p, true))
			}
			fmt.Fprintf(g.Streams.Out, "Profile %s (%s) is current.\n", args[0], p.APIURL)
			return nil
		},
	}
}
