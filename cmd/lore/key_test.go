//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lore/app"
)

// keyringSession starts a private D-Bus session bus and a GNOME Keyring
// daemon on it (the Secret Service a Linux desktop has), unlocked with a
// throwaway password, in a temporary HOME; the environment points the
// test at them. It skips, loudly, only when the programs are not
// installed (`make setup` installs dbus-daemon, gnome-keyring and
// libsecret-tools).
func keyringSession(t *testing.T) {
	t.Helper()
	for _, bin := range []string{"dbus-daemon", "gnome-keyring-daemon", "secret-tool"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("SKIPPED, OS KEYRING NOT TESTED: %s is not installed (apt-get install dbus-daemon gnome-keyring libsecret-tools; `make setup` does)", bin)
		}
	}
	home := t.TempDir()
	run := filepath.Join(home, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_RUNTIME_DIR", run)
	t.Setenv("XDG_DATA_HOME", filepath.Join(home, "data"))
	t.Setenv(app.APIKeyEnv, "")

	bus := exec.Command("dbus-daemon", "--session", "--nofork", "--print-address=1", "--nopidfile")
	bus.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := bus.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-bus.Process.Pid, syscall.SIGTERM); bus.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon printed no address: %v", err)
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", strings.TrimSpace(addr))

	// --unlock reads the login keyring's password from stdin, creating
	// the keyring on first use; the daemon forks and prints its variables.
	kr := exec.Command("gnome-keyring-daemon", "--unlock", "--components=secrets")
	kr.Stdin = strings.NewReader("throwaway-test-password")
	var krOut, krErr bytes.Buffer
	kr.Stdout, kr.Stderr = &krOut, &krErr
	if err := kr.Run(); err != nil {
		t.Fatalf("gnome-keyring-daemon --unlock: %v: %s", err, krErr.String())
	}
	t.Cleanup(func() {
		// It registered on our bus; ending the bus ends it, but end it by
		// its own pid (printed as GNOME_KEYRING_PID where it forks).
		for _, line := range strings.Split(krOut.String(), "\n") {
			if pid, ok := strings.CutPrefix(line, "GNOME_KEYRING_PID="); ok {
				if n, err := strconv.Atoi(strings.TrimSpace(pid)); err == nil {
					syscall.Kill(n, syscall.SIGTERM)
				}
			}
		}
	})
	// The Secret Service appears on the bus once the daemon is up.
	for deadline := time.Now().Add(60 * time.Second); ; {
		if _, _, err := app.LookupAPIKey(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the Secret Service did not come up: %v (daemon: %s %s)", err, krOut.String(), krErr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestKeyring stores, reads and deletes the API key in a real Secret
// Service (GNOME Keyring on a private D-Bus session), checks it with
// libsecret's own secret-tool, and that the key is never printed, never
// written to the settings and overridden by $LORE_API_KEY.
func TestKeyring(t *testing.T) {
	keyringSession(t)
	const key = "sk-test-0123456789abcdef-SECRET"
	key1 := func(args []string, stdin string) (string, error) {
		var out, errOut bytes.Buffer
		err := runKey(args, strings.NewReader(stdin), &out, &errOut)
		if strings.Contains(out.String()+errOut.String(), key) || (err != nil && strings.Contains(err.Error(), key)) {
			t.Fatalf("lore key %v printed the key: %q %q %v", args, out.String(), errOut.String(), err)
		}
		return out.String(), err
	}

	if out, err := key1([]string{"status"}, ""); err != nil || !strings.Contains(out, "No API key") {
		t.Fatalf("status before set: %q, %v", out, err)
	}
	if out, err := key1([]string{"set"}, key+"\n"); err != nil || !strings.Contains(out, "stored in the OS keyring") {
		t.Fatalf("set: %q, %v", out, err)
	}
	// Another Secret Service client sees it where Lore says it is.
	got, err := exec.Command("secret-tool", "lookup", "service", app.KeyringService, "username", app.KeyringUser).Output()
	if err != nil || string(got) != key {
		t.Fatalf("secret-tool lookup: %q, %v: want the stored key", got, err)
	}
	if k, src, err := app.LookupAPIKey(); k != key || src != app.KeyFromKeyring || err != nil {
		t.Fatalf("LookupAPIKey: key ok %v, source %q, %v", k == key, src, err)
	}
	// Stored by another tool with the newline `echo` leaves: read trimmed,
	// since it goes into an HTTP header.
	store := exec.Command("secret-tool", "store", "--label=Lore", "service", app.KeyringService, "username", app.KeyringUser)
	store.Stdin = strings.NewReader(key + "\n")
	if err := store.Run(); err != nil {
		t.Fatalf("secret-tool store: %v", err)
	}
	if k, _, err := app.LookupAPIKey(); k != key || err != nil {
		t.Fatalf("LookupAPIKey after secret-tool stored it with a newline: key ok %v, %v", k == key, err)
	}
	if out, err := key1([]string{"status"}, ""); err != nil || !strings.Contains(out, "from OS keyring") {
		t.Errorf("status after set: %q, %v", out, err)
	}

	// An app with a remote role takes the key from the keyring; the
	// settings it saves never hold it.
	data := t.TempDir()
	a, err := app.New(context.Background(), app.Config{DataDir: data, ChatURL: "http://127.0.0.1:9/v1", ChatURLModel: "m", Keyring: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SaveSettings(context.Background(), a.Settings()); err != nil {
		t.Fatal(err)
	}
	a.Close()
	filepath.Walk(data, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(key)) {
				t.Errorf("%s holds the API key", p)
			}
		}
		return nil
	})

	t.Setenv(app.APIKeyEnv, "from-the-environment")
	if k, src, _ := app.LookupAPIKey(); k != "from-the-environment" || src != app.KeyFromEnv {
		t.Errorf("with $%s set: source %q: want the environment to win", app.APIKeyEnv, src)
	}
	if out, _ := key1([]string{"status"}, ""); !strings.Contains(out, "from $"+app.APIKeyEnv) || strings.Contains(out, "from-the-environment") {
		t.Errorf("status with the environment set: %q", out)
	}
	t.Setenv(app.APIKeyEnv, "")

	for _, bad := range []string{"", "\n", "a\x01b\n"} {
		if _, err := key1([]string{"set"}, bad); err == nil {
			t.Errorf("set %q: accepted", bad)
		}
	}
	if out, err := key1([]string{"delete"}, ""); err != nil || !strings.Contains(out, "removed") {
		t.Errorf("delete: %q, %v", out, err)
	}
	if k, src, err := app.LookupAPIKey(); k != "" || src != "" || err != nil {
		t.Errorf("after delete: found %v from %q, %v", k != "", src, err)
	}
	if out, err := key1([]string{"delete"}, ""); err != nil || !strings.Contains(out, "No API key was stored") {
		t.Errorf("second delete: %q, %v", out, err)
	}
	if _, err := key1([]string{"show"}, ""); err == nil {
		t.Error("an unknown subcommand was accepted")
	}
}

// TestKeyringWithoutBus: with no session bus Lore says the keyring is
// unavailable instead of letting the D-Bus library autolaunch a daemon.
func TestKeyringWithoutBus(t *testing.T) {
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	t.Setenv(app.APIKeyEnv, "")
	if _, _, err := app.LookupAPIKey(); !errors.Is(err, app.ErrNoKeyring) {
		t.Errorf("LookupAPIKey: %v, want ErrNoKeyring", err)
	}
	if err := app.StoreAPIKey("k"); !errors.Is(err, app.ErrNoKeyring) {
		t.Errorf("StoreAPIKey: %v, want ErrNoKeyring", err)
	}
	var out bytes.Buffer
	if err := runKey([]string{"status"}, strings.NewReader(""), &out, &out); err != nil || !strings.Contains(out.String(), "keyring cannot be read") {
		t.Errorf("status: %q, %v", out.String(), err)
	}
	// An app with no remote role never looks.
	a, err := app.New(context.Background(), app.Config{DataDir: t.TempDir(), Keyring: true})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
}
