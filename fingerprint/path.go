package fingerprint

import (
	"fmt"
	"strings"
)

// A path addresses a member of nested objects: "spec.replicas" is key
// "replicas" of the object under key "spec". A path that passes through
// anything but an object (an array, a string, null) addresses nothing. Keys
// that themselves contain a dot cannot be addressed.
type path []string

// parsePath splits a dotted path from the contract; every segment must be
// non-empty.
func parsePath(s string) (path, error) {
	p := path(strings.Split(s, "."))
	for _, seg := range p {
		if seg == "" {
			return nil, fmt.Errorf("path %q has an empty segment", s)
		}
	}
	return p, nil
}

// parent returns the object that holds p's last key. With create, missing
// objects on the way are created (and added to root); without it, or when
// the way passes through a non-object, ok is false and root is unchanged.
func (p path) parent(root map[string]any, create bool) (obj map[string]any, ok bool) {
	obj = root
	for _, seg := range p[:len(p)-1] {
		v, present := obj[seg]
		if !present {
			if !create {
				return nil, false
			}
			next := map[string]any{}
			obj[seg] = next
			obj = next
			continue
		}
		next, isObj := v.(map[string]any)
		if !isObj {
			return nil, false
		}
		obj = next
	}
	return obj, true
}

// last is the key p names in its parent.
func (p path) last() string { return p[len(p)-1] }
