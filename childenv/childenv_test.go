package childenv

import (
	"os/exec"
	"strings"
	"testing"
)

func TestChildHasNoKey(t *testing.T) {
	t.Setenv(APIKey, "sk-secret")
	t.Setenv("LORE_OTHER", "kept")
	cmd := exec.Command("env")
	cmd.Env = Environ()
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "sk-secret") {
		t.Errorf("the child's environment holds the key:\n%s", out)
	}
	if !strings.Contains(string(out), "LORE_OTHER=kept") {
		t.Errorf("the child lost the rest of the environment:\n%s", out)
	}
}
