// Command pluto is Pluto v5.21.7 itself: its own cmd.Execute with its own embedded
// versions.yaml, as the release's cmd/pluto/main.go calls it. Only the version strings,
// which the release sets with -ldflags, are given here.
package main

import (
	plutoversionsfile "github.com/fairwindsops/pluto/v5"
	"github.com/fairwindsops/pluto/v5/cmd"
)

// The release tag and the commit it points at (proxy.golang.org's .info Origin for v5.21.7).
const (
	version = "v5.21.7"
	commit  = "36af4af118b8c9b218e329d020926051159fee61"
)

func main() {
	cmd.Execute(version, commit, plutoversionsfile.Content())
}
