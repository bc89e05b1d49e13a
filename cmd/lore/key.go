package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"lore/app"
)

// keyCmd manages the remote backends' API key in the OS keyring. The key
// is read from stdin (without echo on a terminal) and never printed.
func keyCmd(_ context.Context, args []string) error {
	return runKey(args, os.Stdin, os.Stdout, os.Stderr)
}

func runKey(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	const usage = "usage: lore key set|delete|status\n" +
		"  set      read the remote backends' API key from stdin and store it in the OS keyring\n" +
		"  delete   remove it from the keyring\n" +
		"  status   say whether a key is set and where it comes from ($" + app.APIKeyEnv + " wins over the keyring)"
	if len(args) != 1 {
		fmt.Fprintln(stderr, usage)
		return errors.New("key: want one of set, delete, status")
	}
	switch args[0] {
	case "set":
		key, err := readKey(stdin, stderr)
		if err != nil {
			return err
		}
		if err := app.StoreAPIKey(key); err != nil {
			return fmt.Errorf("key set: %w", err)
		}
		fmt.Fprintln(stdout, "API key stored in the OS keyring.")
		if os.Getenv(app.APIKeyEnv) != "" {
			fmt.Fprintf(stdout, "Note: $%s is set and is used instead while it is.\n", app.APIKeyEnv)
		}
	case "delete":
		had, err := app.DeleteAPIKey()
		if err != nil {
			return fmt.Errorf("key delete: %w", err)
		}
		if had {
			fmt.Fprintln(stdout, "API key removed from the OS keyring.")
		} else {
			fmt.Fprintln(stdout, "No API key was stored in the OS keyring.")
		}
	case "status":
		_, source, err := app.LookupAPIKey()
		switch {
		case err != nil:
			fmt.Fprintf(stdout, "No API key: $%s is unset and the keyring cannot be read (%v).\n", app.APIKeyEnv, err)
		case source == "":
			fmt.Fprintf(stdout, "No API key: $%s is unset and the OS keyring holds none.\n", app.APIKeyEnv)
		default:
			fmt.Fprintf(stdout, "An API key is set, from %s.\n", source)
		}
	default:
		fmt.Fprintln(stderr, usage)
		return fmt.Errorf("key: unknown subcommand %q", args[0])
	}
	return nil
}

// readKey reads one line from stdin; on a terminal it asks for it and
// turns echo off.
func readKey(stdin io.Reader, stderr io.Writer) (string, error) {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(stderr, "API key (not shown): ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(stderr)
		if err != nil {
			return "", fmt.Errorf("key set: read the key: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	line, err := bufio.NewReader(io.LimitReader(stdin, app.MaxAPIKey+2)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("key set: read the key from stdin: %w", err)
	}
	line = strings.TrimSpace(line)
	if line == "" {
		return "", errors.New("key set: no key on stdin (pipe it in, e.g. `lore key set < keyfile`)")
	}
	return line, nil
}
