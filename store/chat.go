package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Chat is a conversation in a workspace.
type Chat struct {
	ID          int64     `json:"id"`
	WorkspaceID int64     `json:"workspace_id"`
	Title       string    `json:"title"`
	Created     time.Time `json:"created"`
	Updated     time.Time `json:"updated"`
	// Questions counts the chat's questions and Last is the latest (its first 120
	// characters), as Chats lists them: two chats with the same title told apart.
	Questions int    `json:"questions,omitempty"`
	Last      string `json:"last,omitempty"`
}

// Message is one turn of a chat.
type Message struct {
	ID        int64     `json:"id"`
	ChatID    int64     `json:"chat_id"`
	Role      string    `json:"role"` // system, user or assistant
	Content   string    `json:"content"`
	Created   time.Time `json:"created"`
	RequestID string    `json:"request_id,omitempty"` // the trace that produced an answer
	// Passages, on a question, are the passages its turn placed in the prompt, as
	// sent; Sources, on an answer, are the sources it was shown with. Both are JSON
	// the app defines, nil when none were stored.
	Passages json.RawMessage `json:"passages,omitempty"`
	Sources  json.RawMessage `json:"sources,omitempty"`
	// Stopped marks an answer the user stopped: Content is what came before.
	Stopped bool `json:"stopped,omitempty"`
}

// NewChat starts a chat in workspace ws.
func (db *DB) NewChat(ctx context.Context, ws int64, title string) (Chat, error) {
	now := time.Now()
	c := Chat{WorkspaceID: ws, Title: validUTF8(title), Created: now, Updated: now}
	err := db.tx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO chats (workspace_id, title, created, updated) VALUES (?, ?, ?, ?) RETURNING id`,
			ws, c.Title, toNanos(now), toNanos(now)).Scan(&c.ID)
	})
	if err != nil {
		return Chat{}, fmt.Errorf("store: new chat: %w", err)
	}
	return c, nil
}

// AppendMessage adds m to chat m.ChatID and returns it with its id and time.
func (db *DB) AppendMessage(ctx context.Context, m Message) (Message, error) {
	switch m.Role {
	case "system", "user", "assistant":
	default:
		return Message{}, fmt.Errorf("store: append message: invalid role %q", m.Role)
	}
	if m.Created.IsZero() {
		m.Created = time.Now()
	}
	m.Content = validUTF8(m.Content)
	err := db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE chats SET updated = ? WHERE id = ?`, toNanos(m.Created), m.ChatID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrNotFound
		}
		return tx.QueryRowContext(ctx, `INSERT INTO chat_messages (chat_id, role, content, created, request_id, passages, sources, stopped)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, m.ChatID, m.Role, m.Content, toNanos(m.Created), m.RequestID,
			string(m.Passages), string(m.Sources), m.Stopped).Scan(&m.ID)
	})
	if err != nil {
		return Message{}, fmt.Errorf("store: append message to chat %d: %w", m.ChatID, err)
	}
	return m, nil
}

// Messages returns a chat's messages in order.
func (db *DB) Messages(ctx context.Context, chatID int64) ([]Message, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, role, content, created, request_id, passages, sources, stopped
		FROM chat_messages WHERE chat_id = ? ORDER BY id`, chatID)
	if err != nil {
		return nil, fmt.Errorf("store: messages of chat %d: %w", chatID, err)
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		m := Message{ChatID: chatID}
		var created int64
		var passages, sources string
		if err := rows.Scan(&m.ID, &m.Role, &m.Content, &created, &m.RequestID, &passages, &sources, &m.Stopped); err != nil {
			return nil, fmt.Errorf("store: messages of chat %d: %w", chatID, err)
		}
		m.Created = fromNanos(created)
		if passages != "" {
			m.Passages = json.RawMessage(passages)
		}
		if sources != "" {
			m.Sources = json.RawMessage(sources)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: messages of chat %d: %w", chatID, err)
	}
	return out, nil
}

// SetPassages stores the passages a question's turn placed in the prompt (JSON) with
// message id. It is written when the answer ends, off the first token's path.
func (db *DB) SetPassages(ctx context.Context, id int64, passages json.RawMessage) error {
	return db.execOne(ctx, fmt.Sprintf("passages of message %d", id), `UPDATE chat_messages SET passages = ? WHERE id = ?`, string(passages), id)
}

// QuestionsWithoutPassages returns the questions stored before questions kept
// the passages their turn placed in the prompt: user messages with a request id
// and no passages.
func (db *DB) QuestionsWithoutPassages(ctx context.Context) ([]Message, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, chat_id, request_id FROM chat_messages
		WHERE role = 'user' AND request_id != '' AND passages = '' ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: questions without passages: %w", err)
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		m := Message{Role: "user"}
		if err := rows.Scan(&m.ID, &m.ChatID, &m.RequestID); err != nil {
			return nil, fmt.Errorf("store: questions without passages: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: questions without passages: %w", err)
	}
	return out, nil
}

// ChatMatch is a chat found by SearchChats, with a piece of the best matching turn
// ("" when only the title matched).
type ChatMatch struct {
	Chat
	Snippet string `json:"snippet,omitempty"`
}

// MaxChatMatches is the most chats SearchChats returns.
const MaxChatMatches = 100

// SearchChats finds a workspace's chats whose title or turns hold every word of
// query (a word typed last may be the start of one, and the porter stemmer
// matches "hotels" to "hotel"), most recently updated first. A query without words
// finds nothing.
func (db *DB) SearchChats(ctx context.Context, ws int64, query string) ([]ChatMatch, error) {
	words := lowerWords(query)
	if len(words) == 0 {
		return nil, nil
	}
	quoted := make([]string, len(words))
	like := make([]string, len(words))
	args := []any{}
	for i, w := range words {
		quoted[i] = `"` + strings.ReplaceAll(w, `"`, `""`) + `"`
		like[i] = `lower(c.title) LIKE ? ESCAPE '\'`
		args = append(args, "%"+likeEscaper.Replace(w)+"%")
	}
	quoted[len(quoted)-1] += "*" // as typed: the last word may be unfinished
	match := strings.Join(quoted, " ")
	// A chat matches when one of its turns holds every word, or its title does.
	rows, err := db.r.QueryContext(ctx, `
		WITH turns AS MATERIALIZED (
			SELECT m.chat_id, f.rank, snippet(chat_messages_fts, 0, '', '', '…', 12) AS snip
			FROM chat_messages_fts f JOIN chat_messages m ON m.id = f.rowid
			WHERE chat_messages_fts MATCH ?
		), hits AS (
			SELECT chat_id, snip, min(rank) FROM turns GROUP BY chat_id -- the best turn's snippet
		)
		SELECT c.id, c.title, c.created, c.updated, coalesce(h.snip, '')
		FROM chats c LEFT JOIN hits h ON h.chat_id = c.id
		WHERE c.workspace_id = ? AND (h.chat_id IS NOT NULL OR (`+strings.Join(like, " AND ")+`))
		ORDER BY c.updated DESC, c.id DESC LIMIT ?`,
		append(append([]any{match, ws}, args...), MaxChatMatches)...)
	if err != nil {
		return nil, fmt.Errorf("store: search chats: %w", err)
	}
	defer rows.Close()
	var out []ChatMatch
	for rows.Next() {
		c := ChatMatch{Chat: Chat{WorkspaceID: ws}}
		var created, updated int64
		if err := rows.Scan(&c.ID, &c.Title, &created, &updated, &c.Snippet); err != nil {
			return nil, fmt.Errorf("store: search chats: %w", err)
		}
		c.Created, c.Updated = fromNanos(created), fromNanos(updated)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: search chats: %w", err)
	}
	return out, nil
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// Chats lists a workspace's chats, most recently updated first.
func (db *DB) Chats(ctx context.Context, ws int64) ([]Chat, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT c.id, c.title, c.created, c.updated,
			(SELECT count(*) FROM chat_messages m WHERE m.chat_id = c.id AND m.role = 'user'),
			coalesce((SELECT substr(m.content, 1, 120) FROM chat_messages m WHERE m.chat_id = c.id AND m.role = 'user'
				ORDER BY m.id DESC LIMIT 1), '')
		FROM chats c WHERE c.workspace_id = ? ORDER BY c.updated DESC, c.id DESC`, ws)
	if err != nil {
		return nil, fmt.Errorf("store: chats: %w", err)
	}
	defer rows.Close()
	var out []Chat
	for rows.Next() {
		c := Chat{WorkspaceID: ws}
		var created, updated int64
		if err := rows.Scan(&c.ID, &c.Title, &created, &updated, &c.Questions, &c.Last); err != nil {
			return nil, fmt.Errorf("store: chats: %w", err)
		}
		c.Created, c.Updated = fromNanos(created), fromNanos(updated)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: chats: %w", err)
	}
	return out, nil
}

// DeleteChat removes a chat and its messages.
func (db *DB) DeleteChat(ctx context.Context, id int64) error {
	return db.execOne(ctx, fmt.Sprintf("delete chat %d", id), `DELETE FROM chats WHERE id = ?`, id)
}
