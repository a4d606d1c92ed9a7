package fingerprint

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/portcullis-dev/portcullis/contract"
)

// rules are contract.FingerprintRules checked and put in the order they are
// applied: paths sorted, so that "spec" is handled before "spec.replicas" and
// the result never depends on map iteration order.
type rules struct {
	defaults []pathDefault
	ignore   []path
	secrets  []path
}

type pathDefault struct {
	path  path
	value []byte // JSON of the default; decoded afresh for each use
}

// CheckRules reports whether Compute can use r: every path well formed,
// every default JSON-representable (numbers exactly so) and within MaxDepth
// once placed at its path. Errors wrap ErrInvalidRules and name the path, so
// config loading can refuse a bad file at start.
func CheckRules(r contract.FingerprintRules) error {
	_, err := compileRules(r)
	return err
}

func compileRules(r contract.FingerprintRules) (rules, error) {
	var out rules
	for _, s := range slices.Sorted(maps.Keys(r.Defaults)) {
		p, err := parsePath(s)
		if err != nil {
			return rules{}, fmt.Errorf("fingerprint defaults: %w: %w", err, ErrInvalidRules)
		}
		raw, err := json.Marshal(r.Defaults[s])
		if err != nil {
			return rules{}, fmt.Errorf("fingerprint defaults: %q: not JSON-representable: %v: %w", s, err, ErrInvalidRules)
		}
		// Decode it as arguments would be, to apply the same checks
		// (exact numbers, depth at its place in the record).
		if _, err := decodeJSON(raw, len(p)); err != nil {
			return rules{}, fmt.Errorf("fingerprint defaults: %q: %w: %w", s, err, ErrInvalidRules)
		}
		out.defaults = append(out.defaults, pathDefault{path: p, value: raw})
	}
	var err error
	if out.ignore, err = parsePaths("ignore", r.Ignore); err != nil {
		return rules{}, err
	}
	if out.secrets, err = parsePaths("secrets", r.Secrets); err != nil {
		return rules{}, err
	}
	return out, nil
}

func parsePaths(what string, in []string) ([]path, error) {
	sorted := slices.Sorted(slices.Values(in))
	out := make([]path, 0, len(sorted))
	for _, s := range sorted {
		p, err := parsePath(s)
		if err != nil {
			return nil, fmt.Errorf("fingerprint %s: %w: %w", what, err, ErrInvalidRules)
		}
		if len(p) > MaxDepth {
			return nil, fmt.Errorf("fingerprint %s: path %q is deeper than %d: %w", what, s, MaxDepth, ErrInvalidRules)
		}
		out = append(out, p)
	}
	return out, nil
}

// normalize applies the rules to args in place, in this order: defaults
// (set where absent, creating missing parent objects), ignore (remove), then
// secrets (replace the value, where present, by secretDigest of it). A path
// both ignored and secret is simply removed.
func (r rules) normalize(args map[string]any, secretDigest func(v any) (string, error)) error {
	for _, d := range r.defaults {
		obj, ok := d.path.parent(args, true)
		if !ok {
			continue // the way to it is not an object: nothing to default
		}
		if _, present := obj[d.path.last()]; present {
			continue
		}
		v, err := decodeJSON(d.value, len(d.path))
		if err != nil { // CheckRules accepted this value
			return fmt.Errorf("fingerprint: default %s: %w", strings.Join(d.path, "."), err)
		}
		obj[d.path.last()] = v
	}
	for _, p := range r.ignore {
		if obj, ok := p.parent(args, false); ok {
			delete(obj, p.last())
		}
	}
	for _, p := range r.secrets {
		obj, ok := p.parent(args, false)
		if !ok {
			continue
		}
		v, present := obj[p.last()]
		if !present {
			continue
		}
		digest, err := secretDigest(v)
		if err != nil {
			return err
		}
		obj[p.last()] = digest
	}
	return nil
}
