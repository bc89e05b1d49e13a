package engine

import (
	"fmt"
	"strings"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/template"
)

// Message is one turn of a chat.
type Message struct {
	Role    string `json:"role"` // system, user, assistant
	Content string `json:"content"`
}

// Template renders chats in a model's prompt format. The Jinja template a
// GGUF file carries is untrusted data: it is only compared with Ollama's
// library of known templates, never executed.
type Template struct {
	Name  string
	tmpl  *template.Template
	Stops []string
}

// families recognise a template by a marker when its text differs too much
// from the library's copy (newer models add tool-calling branches). The Go
// templates are Ollama's.
var families = []struct {
	marker, name, text string
	stops              []string
}{
	{"<|im_start|>", "chatml", "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n",
		[]string{"<|im_start|>", "<|im_end|>"}},
	{"<|start_header_id|>", "llama3-instruct", "{{- range .Messages }}<|start_header_id|>{{ .Role }}<|end_header_id|>\n\n{{ .Content }}<|eot_id|>\n{{- end }}<|start_header_id|>assistant<|end_header_id|>\n\n",
		[]string{"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}},
	{"<|user|>", "phi-3", "{{- range .Messages }}<|{{ .Role }}|>\n{{ .Content }}<|end|>\n{{ end }}<|assistant|>\n",
		[]string{"<|end|>", "<|system|>", "<|user|>", "<|assistant|>"}},
	{"", "plain", "{{- range .Messages }}{{ if eq .Role \"system\" }}{{ .Content }}\n\n{{ else if eq .Role \"user\" }}User: {{ .Content }}\n\n{{ else }}Assistant: {{ .Content }}\n\n{{ end }}{{ end }}Assistant:",
		[]string{"\nUser:"}},
}

// TemplateFor maps a GGUF chat template to a known one: Ollama's library by
// similarity, then a family marker, else a plain fallback.
func TemplateFor(jinja string) *Template {
	if jinja != "" {
		if n, err := template.Named(jinja); err == nil {
			if t, err := template.Parse(string(n.Bytes)); err == nil {
				tt := &Template{Name: n.Name, tmpl: t}
				if n.Parameters != nil {
					tt.Stops = n.Parameters.Stop
				}
				return tt
			}
		}
	}
	for _, f := range families {
		if f.marker == "" || (jinja != "" && strings.Contains(jinja, f.marker)) {
			t, err := template.Parse(f.text)
			if err != nil {
				panic(err) // constant templates
			}
			return &Template{Name: f.name, tmpl: t, Stops: f.stops}
		}
	}
	panic("unreachable: the plain family matches everything")
}

// Render formats msgs and opens the assistant's turn.
func (t *Template) Render(msgs []Message) (string, error) {
	var b strings.Builder
	am := make([]api.Message, len(msgs))
	for i, m := range msgs {
		am[i] = api.Message{Role: m.Role, Content: m.Content}
	}
	if err := t.tmpl.Execute(&b, template.Values{Messages: am}); err != nil {
		return "", fmt.Errorf("render %s template: %w", t.Name, err)
	}
	return b.String(), nil
}

// Prefix returns the part of every prompt that comes before the first user
// turn when the chat starts with system: the stable prefix to keep cached.
func (t *Template) Prefix(system string) (string, error) {
	f, err := t.Frame([]Message{{Role: "system", Content: system}, {Role: "user"}})
	if err != nil {
		return "", err
	}
	return f[0] + system + f[1], nil
}

// Frame is what the template writes around msgs' contents: the text before
// each message's content, then the text after the last one, so that the
// prompt is frame[0] + msgs[0].Content + frame[1] + … + frame[len(msgs)].
// A caller that builds a content from pieces knows where each piece lands
// without searching the rendered prompt. It fails for a template that does
// not place contents verbatim, once each, in order.
func (t *Template) Frame(msgs []Message) ([]string, error) {
	marked := make([]Message, len(msgs))
	marks := make([]string, len(msgs))
	for i, m := range msgs {
		marks[i] = fmt.Sprintf("\x00lore-content-%d\x00", i)
		marked[i] = Message{Role: m.Role, Content: marks[i]}
	}
	s, err := t.Render(marked)
	if err != nil {
		return nil, err
	}
	frame := make([]string, 0, len(msgs)+1)
	for i, mark := range marks {
		before, after, ok := strings.Cut(s, mark)
		if !ok || strings.Contains(after, mark) {
			return nil, fmt.Errorf("%s template does not place message %d's content once, in order", t.Name, i)
		}
		frame = append(frame, before)
		s = after
	}
	return append(frame, s), nil
}
