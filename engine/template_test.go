package engine

import (
	"strings"
	"testing"

	"github.com/ollama/ollama/template"
)

// qwenJinja is the start of Qwen2.5's real template: too long and different
// for a similarity match, recognised by its markers.
const qwenJinja = `{%- if tools %}{{- '<|im_start|>system\n' }}{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}{%- else %}{{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}{%- endif %}{{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}{%- for tool in tools %}{{- "\n" }}{{- tool | tojson }}{%- endfor %}{{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}{%- else %}{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}{%- endif %}{%- endif %}`

func TestTemplateFor(t *testing.T) {
	tests := []struct {
		name, jinja, want string
		contains          []string
	}{
		{"none", "", "plain", []string{"SYS\n\nUser: hi\n\nAssistant:"}},
		{"garbage", "{{ evil() }}", "plain", nil},
		{"qwen markers", qwenJinja, "chatml", []string{"<|im_start|>system\nSYS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"}},
		{"llama3 markers", "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>{{ m.content }}<|eot_id|>{% endfor %} plus a long tail that makes similarity fail " + strings.Repeat("x", 300), "llama3-instruct", []string{"<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm := TemplateFor(tt.jinja)
			if tm.Name != tt.want {
				t.Fatalf("template = %s, want %s", tm.Name, tt.want)
			}
			out, err := tm.Render([]Message{{"system", "SYS"}, {"user", "hi"}})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tt.contains {
				if !strings.Contains(out, c) {
					t.Errorf("render = %q, missing %q", out, c)
				}
			}
			// The stable prefix must be a byte-identical prefix of every chat
			// that starts with the same system prompt.
			prefix, err := tm.Prefix("SYS")
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{"hi", "another question"} {
				full, _ := tm.Render([]Message{{"system", "SYS"}, {"user", q}})
				if !strings.HasPrefix(full, prefix) || len(prefix) == 0 {
					t.Errorf("prefix %q is not a prefix of %q", prefix, full)
				}
			}
		})
	}
}

// TestTemplateFrame: a prompt put together from the frame and the contents
// is the rendered prompt, byte for byte, for every family and for a
// conversation of several turns; a template that drops a content is
// refused.
func TestTemplateFrame(t *testing.T) {
	msgs := []Message{{"system", "SYS"}, {"user", "Sources:\n\n[1] a.md\nfirst\n\nQuestion: q1"}, {"assistant", "answer [1]"},
		{"user", "Question: q2"}}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tm := TemplateFor(f.marker)
			frame, err := tm.Frame(msgs)
			if err != nil {
				t.Fatal(err)
			}
			if len(frame) != len(msgs)+1 {
				t.Fatalf("%d frame pieces for %d messages", len(frame), len(msgs))
			}
			var b strings.Builder
			for i, m := range msgs {
				b.WriteString(frame[i] + m.Content)
			}
			b.WriteString(frame[len(msgs)])
			want, err := tm.Render(msgs)
			if err != nil {
				t.Fatal(err)
			}
			if b.String() != want {
				t.Errorf("frame + contents:\n%q\nrendered:\n%q", b.String(), want)
			}
		})
	}
	t.Run("a template without the system message", func(t *testing.T) {
		tm := TemplateFor("")
		var err error
		tm.tmpl, err = template.Parse("{{- range .Messages }}{{ if ne .Role \"system\" }}{{ .Content }}\n{{ end }}{{ end }}")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tm.Frame(msgs); err == nil || !strings.Contains(err.Error(), "message 0") {
			t.Errorf("err = %v, want message 0 refused", err)
		}
	})
}
