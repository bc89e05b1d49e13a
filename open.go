package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"lore/app"
)

// Files of these types are handed to the OS opener; anything else (scripts,
// programs, shortcuts) is shown in its folder instead.
var openableSuffix = []string{".md", ".markdown", ".mdown", ".mkd", ".txt", ".text", ".pdf", ".docx", ".html", ".htm", ".rst", ".org", ".csv", ".json", ".log"}

// openable says whether a file may be handed to the OS opener: a document
// type, never something the OS would execute.
func openable(path string) bool {
	return slices.Contains(openableSuffix, strings.ToLower(filepath.Ext(path)))
}

// openWithOS opens path with the default application, or shows it in its
// folder when reveal is set. Arguments go to the program directly (no shell).
func openWithOS(path string, reveal bool) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		if reveal {
			cmd = exec.Command("open", "-R", "--", path)
		} else {
			cmd = exec.Command("open", "--", path)
		}
	case "windows":
		if reveal {
			cmd = exec.Command("explorer.exe", "/select,"+path)
		} else {
			cmd = exec.Command("rundll32.exe", "url.dll,FileProtocolHandler", path)
		}
	default:
		if reveal {
			path = filepath.Dir(path)
		}
		cmd = exec.Command("xdg-open", path)
	}
	cmd.Env = app.ChildEnviron()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	go cmd.Wait()
	return nil
}
