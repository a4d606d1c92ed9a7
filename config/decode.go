package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// decoder walks the YAML syntax tree so that every error can name the line
// and key path it is about. It collects errors instead of stopping at the
// first, up to maxErrors.
type decoder struct {
	path    string
	errs    []*Error
	stopped *Error                       // set when maxErrors is reached
	anchors map[string][]*ast.AnchorNode // by name, in file order
	nodes   int                          // value nodes read so far, aliases expanded
	tokens  map[string]string            // bearer token digest → "agent X" / "caller Y"
}

// claimToken records that owner (e.g. "agent agent-7") authenticates with
// the token digest h; false (and an error at n) when another agent or
// caller already does: one token must name one identity.
func (d *decoder) claimToken(n ast.Node, path, h, owner string) bool {
	if d.tokens == nil {
		d.tokens = map[string]string{}
	}
	if other, dup := d.tokens[h]; dup {
		d.errorf(n, path, "the same token digest is already %s's", other)
		return false
	}
	d.tokens[h] = owner
	return true
}

func newDecoder(path string) *decoder {
	return &decoder{path: path, anchors: map[string][]*ast.AnchorNode{}}
}

// err returns the collected errors in file order.
func (d *decoder) err() error {
	sort.SliceStable(d.errs, func(i, j int) bool {
		a, b := d.errs[i], d.errs[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	if d.stopped != nil {
		return joinErrors(append(d.errs, d.stopped))
	}
	return joinErrors(d.errs)
}

// errorf records a problem at node n (or, when n has no position, at the
// file) for key path key.
func (d *decoder) errorf(n ast.Node, key, format string, args ...any) {
	if d.stopped != nil {
		return
	}
	line, col := position(n)
	if len(d.errs) == maxErrors {
		d.stopped = &Error{File: d.path, Line: line, Column: col, Reason: fmt.Sprintf("more than %d errors; stopped here", maxErrors)}
		return
	}
	d.errs = append(d.errs, &Error{File: d.path, Line: line, Column: col, Key: key, Reason: fmt.Sprintf(format, args...)})
}

// position is where n starts in the file, or 0, 0 when unknown.
func position(n ast.Node) (line, col int) {
	if n == nil {
		return 0, 0
	}
	if mv, ok := n.(*ast.MappingValueNode); ok && mv.Key != nil {
		n = mv.Key
	}
	if m, ok := n.(*ast.MappingNode); ok && !m.IsFlowStyle && len(m.Values) > 0 && m.Values[0].Key != nil {
		n = m.Values[0].Key
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return 0, 0
	}
	return tk.Position.Line, tk.Position.Column
}

// file parses data and decodes its one document.
func (d *decoder) file(data []byte) *Config {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		d.syntaxError(err)
		return nil
	}
	var docs []*ast.DocumentNode
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			docs = append(docs, doc)
		}
	}
	switch {
	case len(docs) == 0:
		d.errs = append(d.errs, &Error{File: d.path, Reason: "file is empty (want a mapping with tools:)"})
		return nil
	case len(docs) > 1:
		d.errorf(docs[1].Body, "", "more than one YAML document (want one)")
		return nil
	}
	for _, doc := range docs {
		ast.Walk(anchorCollector{d}, doc.Body)
	}
	return d.config(docs[0].Body)
}

// syntaxError records a YAML syntax error, with its position when the
// parser gives one.
func (d *decoder) syntaxError(err error) {
	var yerr yaml.Error
	if errors.As(err, &yerr) {
		e := &Error{File: d.path, Reason: "YAML syntax: " + yerr.GetMessage()}
		if tk := yerr.GetToken(); tk != nil && tk.Position != nil {
			e.Line, e.Column = tk.Position.Line, tk.Position.Column
		}
		d.errs = append(d.errs, e)
		return
	}
	d.errs = append(d.errs, &Error{File: d.path, Reason: "YAML syntax: " + err.Error()})
}

// anchorCollector records every anchor so aliases can be resolved to the
// latest anchor of their name that precedes them.
type anchorCollector struct{ d *decoder }

func (c anchorCollector) Visit(n ast.Node) ast.Visitor {
	if a, ok := n.(*ast.AnchorNode); ok && a.Name != nil && a.Start != nil && a.Start.Position != nil {
		name := a.Name.GetToken().Value
		c.d.anchors[name] = append(c.d.anchors[name], a)
	}
	return c
}

// resolve strips anchors and follows aliases to the node that holds the
// value. It returns nil (after recording an error) for tags, merge keys and
// unknown aliases.
func (d *decoder) resolve(n ast.Node, key string) ast.Node {
	for range maxValueDepth {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.AliasNode:
			target := d.alias(v)
			if target == nil {
				d.errorf(v, key, "alias %s has no anchor before it", v.String())
				return nil
			}
			n = target.Value
		case *ast.TagNode:
			d.errorf(v, key, "YAML tags such as %s are not supported", v.Start.Value)
			return nil
		case *ast.MergeKeyNode:
			d.errorf(v, key, "merge keys (<<) are not supported")
			return nil
		case *ast.MappingKeyNode:
			n = v.Value
		default:
			return n
		}
	}
	d.errorf(n, key, "aliases nested more than %d deep", maxValueDepth)
	return nil
}

// alias finds the anchor an alias refers to: the last one of that name
// before it.
func (d *decoder) alias(a *ast.AliasNode) *ast.AnchorNode {
	if a.Value == nil || a.Start == nil || a.Start.Position == nil {
		return nil
	}
	var found *ast.AnchorNode
	for _, anchor := range d.anchors[a.Value.GetToken().Value] {
		if anchor.Start.Position.Offset < a.Start.Position.Offset {
			found = anchor
		}
	}
	return found
}

// entry is one key: value pair of a mapping.
type entry struct {
	key   string
	path  string   // key path of the value
	node  ast.Node // the key, for positions
	value ast.Node // unresolved
}

// mapping returns the entries of the mapping at n, in file order. ok is
// false (and an error recorded) when n is not a mapping; a null value is an
// empty mapping.
func (d *decoder) mapping(n ast.Node, path string) (entries []entry, ok bool) {
	n = d.resolve(n, path)
	var values []*ast.MappingValueNode
	switch v := n.(type) {
	case nil:
		return nil, false
	case *ast.NullNode:
		return nil, true
	case *ast.MappingNode:
		values = v.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{v}
	default:
		d.errorf(n, path, "want a mapping, got %s", kind(n))
		return nil, false
	}
	seen := map[string]bool{}
	ok = true
	for _, mv := range values {
		key, kok := d.key(mv.Key, path)
		if !kok {
			ok = false
			continue
		}
		p := join(path, key)
		if seen[key] {
			d.errorf(mv.Key, p, "key is repeated")
			ok = false
			continue
		}
		seen[key] = true
		entries = append(entries, entry{key: key, path: p, node: mv.Key, value: mv.Value})
	}
	return entries, ok
}

// key returns the text of a mapping key; keys must be scalars.
func (d *decoder) key(k ast.MapKeyNode, path string) (string, bool) {
	if k == nil {
		d.errorf(nil, path, "mapping key is missing")
		return "", false
	}
	n := d.resolve(k, path)
	if n == nil {
		return "", false
	}
	s, isNull, ok := scalar(n)
	if !ok || isNull {
		d.errorf(k, path, "mapping key must be a name, got %s", kind(n))
		return "", false
	}
	return s, true
}

// unknownKey records a key the schema does not have.
func (d *decoder) unknownKey(e entry, want string) {
	d.errorf(e.node, e.path, "unknown key %q (want %s)", e.key, want)
}

// str returns the text of a scalar value. Numbers and booleans are taken
// as written, so `target: 10.0.0.1` and `method: 2` both read as text.
// Null, mappings and sequences are errors.
func (d *decoder) str(e entry) (string, bool) {
	n := d.resolve(e.value, e.path)
	if n == nil {
		return "", false
	}
	s, isNull, ok := scalar(n)
	switch {
	case isNull:
		d.errorf(e.node, e.path, "value is missing")
		return "", false
	case !ok:
		d.errorf(n, e.path, "want a string, got %s", kind(n))
		return "", false
	}
	return s, true
}

// list returns the scalar items of the sequence at e. A null value is an
// empty list. Each item comes with its node, for positions.
func (d *decoder) list(e entry) (items []string, nodes []ast.Node, ok bool) {
	n := d.resolve(e.value, e.path)
	switch v := n.(type) {
	case nil:
		return nil, nil, false
	case *ast.NullNode:
		return nil, nil, true
	case *ast.SequenceNode:
		ok = true
		for i, item := range v.Values {
			p := fmt.Sprintf("%s[%d]", e.path, i)
			in := d.resolve(item, p)
			if in == nil {
				ok = false
				continue
			}
			s, isNull, sok := scalar(in)
			if !sok || isNull {
				d.errorf(in, p, "want a string, got %s", kind(in))
				ok = false
				continue
			}
			items = append(items, s)
			nodes = append(nodes, in)
		}
		return items, nodes, ok
	default:
		d.errorf(n, e.path, "want a list, got %s", kind(n))
		return nil, nil, false
	}
}

// value converts the node at n to the Go value encoding/json would give
// for the same data: map[string]any, []any, string, float64, bool or nil.
// Values that JSON cannot hold (NaN, infinities) are errors.
func (d *decoder) value(n ast.Node, path string, depth int) (any, bool) {
	d.nodes++
	if d.nodes > maxValueNodes {
		if d.nodes == maxValueNodes+1 {
			d.errorf(n, path, "more than %d values (aliases expanded)", maxValueNodes)
		}
		return nil, false
	}
	if depth > maxValueDepth {
		d.errorf(n, path, "nested more than %d deep", maxValueDepth)
		return nil, false
	}
	n = d.resolve(n, path)
	switch v := n.(type) {
	case nil:
		return nil, false
	case *ast.NullNode:
		return nil, true
	case *ast.BoolNode:
		return v.Value, true
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		if v.Value == nil {
			return "", true
		}
		return v.Value.Value, true
	case *ast.IntegerNode:
		switch i := v.Value.(type) {
		case int64:
			return float64(i), true
		case uint64:
			return float64(i), true
		}
		d.errorf(n, path, "integer %s is out of range", v.Token.Value)
		return nil, false
	case *ast.FloatNode:
		if math.IsNaN(v.Value) || math.IsInf(v.Value, 0) {
			d.errorf(n, path, "number %s cannot be written in JSON", v.Token.Value)
			return nil, false
		}
		return v.Value, true
	case *ast.InfinityNode, *ast.NanNode:
		d.errorf(n, path, "number %s cannot be written in JSON", n.GetToken().Value)
		return nil, false
	case *ast.SequenceNode:
		out := make([]any, 0, len(v.Values))
		ok := true
		for i, item := range v.Values {
			x, iok := d.value(item, fmt.Sprintf("%s[%d]", path, i), depth+1)
			ok = ok && iok
			out = append(out, x)
		}
		return out, ok
	case *ast.MappingNode, *ast.MappingValueNode:
		entries, ok := d.mapping(n, path)
		out := make(map[string]any, len(entries))
		for _, e := range entries {
			x, eok := d.value(e.value, e.path, depth+1)
			ok = ok && eok
			out[e.key] = x
		}
		return out, ok
	}
	d.errorf(n, path, "unsupported value %s", kind(n))
	return nil, false
}

// jsonObject converts the mapping at e to JSON.
func (d *decoder) jsonObject(e entry) ([]byte, bool) {
	n := d.resolve(e.value, e.path)
	if n == nil {
		return nil, false
	}
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
	default:
		d.errorf(n, e.path, "want a mapping, got %s", kind(n))
		return nil, false
	}
	v, ok := d.value(n, e.path, 0)
	if !ok {
		return nil, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		d.errorf(n, e.path, "cannot be written as JSON: %v", err)
		return nil, false
	}
	return b, true
}

// scalar returns the text of a scalar node as written (strings unquoted).
func scalar(n ast.Node) (s string, isNull, ok bool) {
	switch v := n.(type) {
	case *ast.NullNode:
		return "", true, true
	case *ast.StringNode:
		return v.Value, false, true
	case *ast.LiteralNode:
		if v.Value == nil {
			return "", false, true
		}
		return v.Value.Value, false, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		if tk := n.GetToken(); tk != nil {
			return tk.Value, false, true
		}
	}
	return "", false, false
}

// kind names the YAML type of n for messages.
func kind(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.NullNode:
		return "null"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	case nil:
		return "nothing"
	}
	return strings.ToLower(n.Type().String())
}

// join appends key to a key path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
