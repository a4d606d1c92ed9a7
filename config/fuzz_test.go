package config

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that every error is a complete
// *Error, and that every accepted config holds only valid contracts.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("../examples/portcullis.yaml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("tools:\n  a: {retry: read_only}\n"))
	f.Add([]byte("gateway: {id: gw1}\ntools:\n  a: {retry: irreversible, match_window: until_resolved, approval: per_use}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.yaml", data)
		if err != nil {
			if cfg != nil {
				t.Fatal("config returned with an error")
			}
			checkErrors(t, err)
			return
		}
		if cfg.Path != "fuzz.yaml" || cfg.Tools == nil {
			t.Fatalf("config %+v", cfg)
		}
		if len(cfg.GatewayID) > maxGatewayIDLen {
			t.Fatalf("gateway id %q", cfg.GatewayID)
		}
		book := cfg.Contracts()
		if len(book) != len(cfg.Tools) {
			t.Fatalf("%d contracts for %d tools", len(book), len(cfg.Tools))
		}
		for name, tool := range cfg.Tools {
			c := tool.Contract
			if err := c.Validate(); err != nil {
				t.Fatalf("accepted invalid contract: %v", err)
			}
			if name != tool.Name || name != c.Tool || !toolNameRE.MatchString(name) {
				t.Fatalf("tool %q named %q, contract for %q", name, tool.Name, c.Tool)
			}
			if c.MatchWindow.Duration < 0 || c.MatchWindow.Duration > MaxMatchWindow {
				t.Fatalf("tool %q: match window %v", name, c.MatchWindow)
			}
			if tool.InputSchema != nil && !json.Valid(tool.InputSchema) {
				t.Fatalf("tool %q: input schema %q is not JSON", name, tool.InputSchema)
			}
			for _, p := range append(append([]string{}, c.Fingerprint.Ignore...), c.Fingerprint.Secrets...) {
				if checkPath(p) != "" {
					t.Fatalf("tool %q: accepted path %q", name, p)
				}
			}
			for _, s := range c.Fingerprint.Secrets {
				for _, i := range c.Fingerprint.Ignore {
					if s == i {
						t.Fatalf("tool %q: %q both ignored and secret", name, s)
					}
				}
			}
			if _, err := json.Marshal(c.Fingerprint.Defaults); err != nil {
				t.Fatalf("tool %q: defaults: %v", name, err)
			}
		}
	})
}

// checkErrors asserts that err is one or more *Error, each naming the file
// and a reason.
func checkErrors(t *testing.T, err error) {
	t.Helper()
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	if len(errs) > maxErrors+1 {
		t.Fatalf("%d errors", len(errs))
	}
	for _, e := range errs {
		var ce *Error
		if !errors.As(e, &ce) || ce.File != "fuzz.yaml" || ce.Reason == "" {
			t.Fatalf("incomplete error %#v", e)
		}
		if !strings.HasPrefix(e.Error(), "fuzz.yaml") {
			t.Fatalf("error %q does not name the file", e)
		}
	}
}
