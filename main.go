// Command lore-desktop is Lore's desktop app: the web UI (frontend/dist) in
// a native window through Wails v2, calling the app service directly through
// the bindings in desktop.go instead of HTTP.
//
// Build it with `make app` (Linux: tags desktop,production,webkit2_41); see
// docs/build.md for macOS and Windows. Without the Wails build tags wails.Run
// is a stub that fails at run time, so `go vet ./...` and `go test ./...`
// need no GTK or WebKit.
//
// Data lives in $LORE_DATA, else the per-user data folder (as for `lore`).
// The binary re-executes itself as the parse worker, like bin/lore, and
// starts the lore-runner-<variant> program beside it for models.
package main

import (
	"context"
	_ "embed"
	"fmt"
	"io/fs"
	"os"

	"github.com/wailsapp/wails/v2"
	"github.com/wailsapp/wails/v2/pkg/options"
	"github.com/wailsapp/wails/v2/pkg/options/assetserver"
	"github.com/wailsapp/wails/v2/pkg/options/linux"
	"github.com/wailsapp/wails/v2/pkg/options/mac"
	"github.com/wailsapp/wails/v2/pkg/options/windows"

	"lore/app"
	"lore/frontend"
)

// icon is the window and About icon (also what `wails build` packages for macOS and Windows).
//
//go:embed build/appicon.png
var icon []byte

func main() {
	app.MaybeServeWorker(os.Args) // a parse worker child process serves and exits here
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "lore-desktop:", err)
		os.Exit(1)
	}
}

func run() error {
	ui, err := fs.Sub(frontend.Dist, "dist")
	if err != nil {
		return err
	}
	if _, err := fs.Stat(ui, "index.html"); err != nil {
		return fmt.Errorf("the UI is not built into this binary (run `make ui` first): %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Remote backends (settings chat_url, embed_url, rerank_url) take their key
	// from $LORE_API_KEY or the OS keyring (`lore key set`).
	core, err := app.New(ctx, app.Config{DataDir: app.DefaultDataDir(), Watch: true, Warm: true,
		APIKey: os.Getenv(app.APIKeyEnv), Keyring: true})
	if err != nil {
		return err
	}
	defer core.Close()
	d := newDesktop(core)

	white := &options.RGBA{R: 255, G: 255, B: 255, A: 255}
	return wails.Run(&options.App{
		Title:            "Lore",
		Width:            1280,
		Height:           860,
		MinWidth:         800,
		MinHeight:        560,
		BackgroundColour: white,
		AssetServer:      &assetserver.Options{Assets: ui},
		OnStartup:        d.startup,
		OnShutdown:       d.shutdown,
		Bind:             []any{d},
		// No "Inspect element"/reload menu in the shipped app.
		EnableDefaultContextMenu: false,
		Linux: &linux.Options{
			ProgramName: "lore",
			Icon:        icon,
			// Software rendering: the UI is light, and GPU compositing in
			// WebKitGTK blanks the window on some drivers and under Xvfb
			// (wailsapp/wails#2977).
			WebviewGpuPolicy: linux.WebviewGpuPolicyNever,
		},
		Mac: &mac.Options{
			About: &mac.AboutInfo{Title: "Lore", Message: "A local knowledge assistant: answers from your own documents, on this machine.", Icon: icon},
		},
		Windows: &windows.Options{},
	})
}
