// Package frontend holds Lore's built web UI (frontend/dist, made by
// `make ui`), embedded into the binary.
package frontend

import "embed"

// Dist is the built UI under "dist".
//
//go:embed all:dist
var Dist embed.FS
