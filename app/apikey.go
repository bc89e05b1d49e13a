package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/zalando/go-keyring"

	"lore/app/remote"
	"lore/childenv"
)

// The remote backends' API key lives in $LORE_API_KEY or in the OS
// keyring (macOS Keychain, Windows Credential Manager, the Secret Service
// on Linux: GNOME Keyring, KWallet), under this service and account. It is
// never a setting, never printed, and never part of an error.
const (
	KeyringService = "lore"
	KeyringUser    = "remote-api-key"
	// APIKeyEnv overrides the keyring.
	APIKeyEnv = childenv.APIKey // child processes never see it
)

// ChildEnviron is the environment for a process a front door starts (the
// desktop's file opener): this one's without the API key.
func ChildEnviron() []string { return childenv.Environ() }

// Where an API key came from.
const (
	KeyFromEnv     = "$" + APIKeyEnv
	KeyFromKeyring = "OS keyring"
)

// ErrNoKeyring is returned when the OS keyring cannot be reached (on
// Linux: no D-Bus session bus, or no Secret Service on it).
var ErrNoKeyring = errors.New("OS keyring unavailable")

// MaxAPIKey bounds a stored key's length.
const MaxAPIKey = 4096

// LookupAPIKey returns the API key and where it came from: $LORE_API_KEY
// when set, else the OS keyring; "" and "" when neither has one. An
// unreachable keyring is an error (ErrNoKeyring) only when the
// environment has no key either.
func LookupAPIKey() (key, source string, err error) {
	if k := os.Getenv(APIKeyEnv); k != "" {
		return k, KeyFromEnv, nil
	}
	if err := keyringReachable(); err != nil {
		return "", "", err
	}
	k, err := keyring.Get(KeyringService, KeyringUser)
	switch {
	case errors.Is(err, keyring.ErrNotFound):
		return "", "", nil
	case err != nil:
		return "", "", fmt.Errorf("%w: %v", ErrNoKeyring, err)
	}
	if k, err = cleanAPIKey(k); err != nil {
		return "", "", fmt.Errorf("the key in the OS keyring: %w (store it again with lore key set)", err)
	}
	return k, KeyFromKeyring, nil
}

// StoreAPIKey saves key in the OS keyring, replacing any stored one.
func StoreAPIKey(key string) error {
	key, err := cleanAPIKey(key)
	if err != nil {
		return err
	}
	if err := keyringReachable(); err != nil {
		return err
	}
	if err := keyring.Set(KeyringService, KeyringUser, key); err != nil {
		return fmt.Errorf("%w: store the API key: %v", ErrNoKeyring, remote.ScrubKey(err, key))
	}
	return nil
}

// cleanAPIKey trims key (`echo key | secret-tool store` keeps the newline)
// and checks that it can go into an HTTP header.
func cleanAPIKey(key string) (string, error) {
	key = strings.TrimSpace(key)
	switch {
	case key == "":
		return "", fmt.Errorf("%w: empty API key", ErrInvalid)
	case len(key) > MaxAPIKey:
		return "", fmt.Errorf("%w: API key longer than %d bytes", ErrInvalid, MaxAPIKey)
	case strings.ContainsFunc(key, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return "", fmt.Errorf("%w: API key holds control characters", ErrInvalid)
	}
	return key, nil
}

// DeleteAPIKey removes the stored key; false when there was none.
func DeleteAPIKey() (bool, error) {
	if err := keyringReachable(); err != nil {
		return false, err
	}
	err := keyring.Delete(KeyringService, KeyringUser)
	switch {
	case errors.Is(err, keyring.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%w: delete the API key: %v", ErrNoKeyring, err)
	}
	return true, nil
}

// keyringReachable refuses, on Linux, to look for a Secret Service when
// there is no session bus: the D-Bus library would otherwise run
// `dbus-launch --autolaunch`, leaving a daemon behind on a headless
// machine.
func keyringReachable() error {
	if runtime.GOOS != "linux" || os.Getenv("DBUS_SESSION_BUS_ADDRESS") != "" {
		return nil
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "bus")); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is unset); set %s instead", ErrNoKeyring, APIKeyEnv)
}
