package app

import (
	"slices"
	"strconv"
	"sync"

	"lore/index/retrieve"
)

// earlierTurns are the layouts of recent questions whose answer sequence
// the chat model's runner keeps in memory (GenerateRequest.KeepAs), most
// recent first. A question in another chat, or the same one asked again
// after others, whose prompt starts with an earlier question's passages
// names that state to restore (GenerateRequest.Restore) and reads only
// the rest. The runner decides by tokens whether the state holds more of
// the prompt than its sequences do, and keeps its states within a byte
// budget; after each answer it names the states it keeps, and only those
// stay here. It has its own lock.
type earlierTurns struct {
	mu    sync.Mutex
	turns []earlierTurn
	named int // names handed out
}

// earlierTurn is one question's layout and the name its state is kept
// under by chat's runner.
type earlierTurn struct {
	heldLayout
	chat localChat
	name string
}

// keepBytes is the memory each chat model's runner may keep answered
// prompts' states in: about eight ~1,200-token prompts of the demo model
// (23 KiB of KV a token), eighteen of the 0.5B shape (12 KiB). Other models
// never keep any.
const keepBytes = 256 << 20

// nameFor is the name to keep the state of a question laid out as turn
// after base under: the name of an earlier question's with the same layout
// (the runner replaces it), else a new one.
func (k *earlierTurns) nameFor(chat localChat, base string, turn []retrieve.Passage) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, t := range k.turns {
		if t.chat == chat && t.base == base && samePassages(t.passages, turn) {
			return t.name
		}
	}
	k.named++
	return "turn-" + strconv.Itoa(k.named)
}

// kept remembers t, the newest (if its runner kept it), and forgets the
// layouts of t.chat whose states its runner no longer keeps (names).
func (k *earlierTurns) kept(t earlierTurn, names []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.turns = slices.DeleteFunc(k.turns, func(o earlierTurn) bool {
		return o.chat == t.chat && (o.name == t.name || !slices.Contains(names, o.name))
	})
	if t.name != "" && slices.Contains(names, t.name) {
		k.turns = slices.Insert(k.turns, 0, t)
	}
}

// layouts adds to r the layouts chat's runner keeps states of after the
// conversation base, each with the state's name.
func (k *earlierTurns) layouts(chat localChat, base string, r *reuse) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, t := range k.turns {
		if t.chat == chat && t.base == base {
			r.earlier = append(r.earlier, earlierLayout{t.passages, t.name})
		}
	}
}

// forget drops the layouts of chat (its model is closing).
func (k *earlierTurns) forget(chat localChat) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.turns = slices.DeleteFunc(k.turns, func(t earlierTurn) bool { return t.chat == chat })
}

func samePassages(a, b []retrieve.Passage) bool {
	return slices.EqualFunc(a, b, func(p, q retrieve.Passage) bool { return p.ChunkID == q.ChunkID })
}
