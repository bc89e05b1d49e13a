package app

// Event is one step of an answer as it streams to a front door. Kind is
// its name on the wire (the SSE event name, the desktop event's type); the
// value itself is the JSON payload.
type Event interface{ Kind() string }

// Sink receives an answer's events in order. It should flush each one; an
// error from it (a client gone) cancels the answer.
type Sink func(Event) error

// Started is the first event of an admitted question: the id to cancel it
// by, and the chat it goes to (a new one is created before this event, so
// an answer stopped at once can still be continued in it).
type Started struct {
	RequestID string `json:"request_id"`
	ChatID    int64  `json:"chat_id"`
}

// StageEvent reports a stage starting or finishing.
type StageEvent struct {
	Name   string         `json:"name"`
	State  string         `json:"state"` // start, done
	Ms     float64        `json:"ms,omitempty"`
	Detail map[string]any `json:"detail,omitempty"`
}

// Sources are the passages the answer may cite, numbered as it cites them.
type Sources []Source

// Token is a piece of the answer's text.
type Token struct {
	Text string `json:"text"`
}

// Done ends an answer (also a stopped one) with its stored trace.
type Done struct{ *Trace }

func (Started) Kind() string    { return "trace" }
func (StageEvent) Kind() string { return "stage" }
func (Sources) Kind() string    { return "sources" }
func (Token) Kind() string      { return "token" }
func (Done) Kind() string       { return "done" }

// A stage event's State; its Name is a trace stage without the "_ms" suffix.
const (
	stageStart = "start"
	stageDone  = "done"
)

// Source is a passage as the UI shows it.
type Source struct {
	N         int    `json:"n"`
	ChunkID   int64  `json:"chunk_id"`
	Document  string `json:"document"`
	Path      string `json:"path"`
	Page      int    `json:"page"`
	Heading   string `json:"heading"`
	LineStart int    `json:"line_start"`
	LineEnd   int    `json:"line_end"`
	Text      string `json:"text"`
	Scores    Scores `json:"scores"`
}

// Scores are a passage's retrieval scores.
type Scores struct {
	BM25       float64 `json:"bm25"`
	Vector     float64 `json:"vector"`
	Fused      float64 `json:"fused"`
	Rerank     float64 `json:"rerank"`
	BM25Rank   int     `json:"bm25_rank,omitempty"`
	VectorRank int     `json:"vector_rank,omitempty"`
}
