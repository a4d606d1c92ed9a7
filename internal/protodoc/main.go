// Command protodoc is a protoc plugin that writes the API reference of the
// Connect services (docs/reference/api.md) from the protos and their
// comments. buf runs it as a local plugin (buf.gen.yaml), so the reference
// is regenerated with the code and CI finds it stale like gen/.
package main

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	protogen.Options{}.Run(func(p *protogen.Plugin) error {
		p.SupportedFeatures = uint64(pluginpb.CodeGeneratorResponse_FEATURE_PROTO3_OPTIONAL)
		var files []*protogen.File
		for _, f := range p.Files {
			if f.Generate {
				files = append(files, f)
			}
		}
		sort.Slice(files, func(i, j int) bool { return files[i].Desc.Path() < files[j].Desc.Path() })
		g := p.NewGeneratedFile("api.md", "")
		write(g, files)
		return nil
	})
}

func write(g *protogen.GeneratedFile, files []*protogen.File) {
	g.P("# API reference")
	g.P()
	g.P("Generated from `proto/` by `buf generate` (internal/protodoc); do not edit. The Connect API with")
	g.P("examples is in [../api.md](../api.md). JSON field names are the lowerCamel names shown; proto3 JSON")
	g.P("omits fields that hold their default value.")
	g.P()
	for _, f := range files {
		g.P("- [", f.Desc.Path(), "](#", anchor(f.Desc.Path()), ")")
	}
	for _, f := range files {
		g.P()
		g.P("## ", f.Desc.Path())
		for _, s := range f.Services {
			service(g, s)
		}
		for _, m := range f.Messages {
			message(g, m)
		}
		for _, e := range f.Enums {
			enum(g, e)
		}
	}
}

func service(g *protogen.GeneratedFile, s *protogen.Service) {
	g.P()
	g.P("### service ", s.Desc.FullName())
	comment(g, s.Comments.Leading)
	g.P()
	g.P("| method | request | response | HTTP | description |")
	g.P("|---|---|---|---|---|")
	for _, m := range s.Methods {
		verb := "POST"
		if o, ok := m.Desc.Options().(*descriptorpb.MethodOptions); ok && o.GetIdempotencyLevel() == descriptorpb.MethodOptions_NO_SIDE_EFFECTS {
			verb = "POST, GET"
		}
		g.P("| `", m.Desc.Name(), "` | ", typeLink(m.Input.Desc), " | ", typeLink(m.Output.Desc), " | ", verb, " | ", cell(m.Comments.Leading), " |")
	}
	g.P()
	g.P("Path: `/", s.Desc.FullName(), "/<method>`.")
}

func message(g *protogen.GeneratedFile, m *protogen.Message) {
	if m.Desc.IsMapEntry() {
		return
	}
	g.P()
	g.P("### ", m.Desc.FullName())
	comment(g, m.Comments.Leading)
	if len(m.Fields) > 0 {
		g.P()
		g.P("| field | JSON | # | type | description |")
		g.P("|---|---|---|---|---|")
		for _, f := range m.Fields {
			desc := cell(f.Comments.Leading + f.Comments.Trailing)
			if o := f.Oneof; o != nil && !o.Desc.IsSynthetic() {
				desc = strings.TrimSpace("one of `" + string(o.Desc.Name()) + "`. " + desc)
			}
			g.P("| `", f.Desc.Name(), "` | `", f.Desc.JSONName(), "` | ", f.Desc.Number(), " | ", fieldType(f.Desc), " | ", desc, " |")
		}
	}
	for _, e := range m.Enums {
		enum(g, e)
	}
	for _, n := range m.Messages {
		message(g, n)
	}
}

func enum(g *protogen.GeneratedFile, e *protogen.Enum) {
	g.P()
	g.P("### enum ", e.Desc.FullName())
	comment(g, e.Comments.Leading)
	g.P()
	g.P("| value | # | description |")
	g.P("|---|---|---|")
	for _, v := range e.Values {
		g.P("| `", v.Desc.Name(), "` | ", v.Desc.Number(), " | ", cell(v.Comments.Leading+v.Comments.Trailing), " |")
	}
}

func fieldType(f protoreflect.FieldDescriptor) string {
	var t string
	switch {
	case f.IsMap():
		return fmt.Sprintf("map<%s, %s>", fieldType(f.MapKey()), fieldType(f.MapValue()))
	case f.Message() != nil:
		t = typeLink(f.Message())
	case f.Enum() != nil:
		t = typeLink(f.Enum())
	default:
		t = "`" + f.Kind().String() + "`"
	}
	if f.IsList() {
		return "repeated " + t
	}
	return t
}

// typeLink links a message or enum of this package to its heading; other
// packages' types (google.protobuf.*) are named only.
func typeLink(d protoreflect.Descriptor) string {
	name := string(d.FullName())
	if !strings.HasPrefix(name, "portcullis.") {
		return "`" + name + "`"
	}
	prefix := ""
	if _, ok := d.(protoreflect.EnumDescriptor); ok {
		prefix = "enum "
	}
	return "[" + string(d.Name()) + "](#" + anchor(prefix+name) + ")"
}

// anchor is the id GitHub gives a heading.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func comment(g *protogen.GeneratedFile, c protogen.Comments) {
	if s := strings.TrimSpace(string(c)); s != "" {
		g.P()
		for _, line := range strings.Split(s, "\n") {
			g.P(strings.TrimSpace(line))
		}
	}
}

// cell is a comment on one table row.
func cell(c protogen.Comments) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(string(c)), " "), "|", `\|`)
}
