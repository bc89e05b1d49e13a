package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Chat is a conversation in a workspace.
type Chat struct {
	ID          int64     `json:"id"`
	WorkspaceID int64     `json:"workspace_id"`
	Title       string    `json:"title"`
	Created     time.Time `json:"created"`
	Updated     time.Time `json:"updated"`
}

// Message is one turn of a chat.
type Message struct {
	ID        int64     `json:"id"`
	ChatID    int64     `json:"chat_id"`
	Role      string    `json:"role"` // system, user or assistant
	Content   string    `json:"content"`
	Created   time.Time `json:"created"`
	RequestID string    `json:"request_id,omitempty"` // the trace that produced an answer
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
		return tx.QueryRowContext(ctx, `INSERT INTO chat_messages (chat_id, role, content, created, request_id)
			VALUES (?, ?, ?, ?, ?) RETURNING id`, m.ChatID, m.Role, m.Content, toNanos(m.Created), m.RequestID).Scan(&m.ID)
	})
	if err != nil {
		return Message{}, fmt.Errorf("store: append message to chat %d: %w", m.ChatID, err)
	}
	return m, nil
}

// Messages returns a chat's messages in order.
func (db *DB) Messages(ctx context.Context, chatID int64) ([]Message, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, role, content, created, request_id FROM chat_messages
		WHERE chat_id = ? ORDER BY id`, chatID)
	if err != nil {
		return nil, fmt.Errorf("store: messages of chat %d: %w", chatID, err)
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		m := Message{ChatID: chatID}
		var created int64
		if err := rows.Scan(&m.ID, &m.Role, &m.Content, &created, &m.RequestID); err != nil {
			return nil, fmt.Errorf("store: messages of chat %d: %w", chatID, err)
		}
		m.Created = fromNanos(created)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: messages of chat %d: %w", chatID, err)
	}
	return out, nil
}

// Chats lists a workspace's chats, most recently updated first.
func (db *DB) Chats(ctx context.Context, ws int64) ([]Chat, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, title, created, updated FROM chats
		WHERE workspace_id = ? ORDER BY updated DESC, id DESC`, ws)
	if err != nil {
		return nil, fmt.Errorf("store: chats: %w", err)
	}
	defer rows.Close()
	var out []Chat
	for rows.Next() {
		c := Chat{WorkspaceID: ws}
		var created, updated int64
		if err := rows.Scan(&c.ID, &c.Title, &created, &updated); err != nil {
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
	var n int64
	err := db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM chats WHERE id = ?`, id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err == nil && n == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("store: delete chat %d: %w", id, err)
	}
	return nil
}
