package telemetry

import "runtime/debug"

// Version is the binary's module version and VCS revision, from the build
// information the Go toolchain embeds ("(devel)" in a plain `go run`).
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v += " " + s.Value
		case "vcs.modified":
			if s.Value == "true" {
				v += "+dirty"
			}
		}
	}
	return v
}
