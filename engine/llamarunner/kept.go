package llamarunner

import (
	"container/list"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"lore/engine/wire"
)

// keptStates are sequence states a generate kept (Request.KeepAs) in the
// runner's memory, for a later generate to place back (Request.Restore):
// an answer's prompt is read again by another chat that starts with the
// same passages, without the state crossing the process boundary. Least
// recently used out first, within a byte budget (LoadParams.KeepBytes).
type keptStates struct {
	budget, bytes int64
	order         *list.List // of *keptState, most recently used first
	byName        map[string]*list.Element
}

type keptState struct {
	name string
	toks []int
	data []byte
}

func (k *keptState) size() int64 { return int64(len(k.data) + 8*len(k.toks)) }

func newKeptStates(budget int64) *keptStates {
	return &keptStates{budget: budget, order: list.New(), byName: map[string]*list.Element{}}
}

func (k *keptStates) put(s *keptState) {
	if old, ok := k.byName[s.name]; ok {
		k.remove(old)
	}
	if s.size() > k.budget {
		return
	}
	for k.bytes+s.size() > k.budget {
		k.remove(k.order.Back())
	}
	k.byName[s.name] = k.order.PushFront(s)
	k.bytes += s.size()
}

// get returns the state kept under name; used says it is being placed
// (most recently used now).
func (k *keptStates) get(name string, used bool) (*keptState, bool) {
	el, ok := k.byName[name]
	if !ok {
		return nil, false
	}
	if used {
		k.order.MoveToFront(el)
	}
	return el.Value.(*keptState), true
}

func (k *keptStates) remove(el *list.Element) {
	s := k.order.Remove(el).(*keptState)
	delete(k.byName, s.name)
	k.bytes -= s.size()
}

// keep keeps sequence seq's state under name. Stitched cells are not kept:
// a kept state is reused as exact.
func (s *server) keep(seq int, name string) error {
	if s.stitched[seq].from < len(s.seqs[seq]) {
		return fmt.Errorf("sequence %d holds stitched passages", seq)
	}
	if len(s.seqs[seq]) == 0 {
		return fmt.Errorf("sequence %d is empty", seq)
	}
	data, err := stateGet(s.lctx, seq)
	if err != nil {
		return err
	}
	s.kept.put(&keptState{name: name, toks: slices.Clone(s.seqs[seq]), data: data})
	return nil
}

// restore places the state kept under req.Restore in req.Seq when it holds
// more of toks than any sequence does. Otherwise, or when it is no longer
// kept, st.RestoreSkipped says why and the sequences are as they were; if
// llama.cpp refuses the state, req.Seq is left empty (other sequences may
// have been cleared to make room) and the prompt is read in full.
func (s *server) restore(req wire.Request, toks []int, st *wire.Stats) {
	if s.kept == nil {
		st.RestoreSkipped = "this model keeps no states (none asked for, a sliding window or a recurrent state)"
		return
	}
	k, ok := s.kept.get(req.Restore, false)
	if !ok {
		st.RestoreSkipped = "no longer kept (the runner restarted or needed the memory)"
		return
	}
	_, held := s.bestPrefix(req, toks)
	if n := commonPrefix(k.toks, toks); n <= held {
		st.RestoreSkipped = fmt.Sprintf("a sequence holds as much of the prompt (%d tokens; the kept state %d)", held, n)
		return
	}
	s.kept.get(req.Restore, true)
	t := time.Now()
	evicted, err := s.setState(req.Seq, k.data, k.toks)
	st.Evicted += evicted
	if err != nil {
		st.RestoreSkipped = "restore: " + err.Error()
		return
	}
	st.Restored, st.RestoreMs = true, ms(time.Since(t))
}

// setState replaces sequence seq's KV with a saved state holding toks, making
// room in the cache by evicting other sequences if need be.
func (s *server) setState(seq int, data []byte, toks []int) (evicted int, err error) {
	s.clearSeq(seq)
	for {
		err := stateSet(s.lctx, seq, data)
		if err == nil {
			break
		}
		// No free cells is one reason llama.cpp rejects a state; make room once per other sequence.
		if !errors.Is(err, errStateRejected) || !s.evict(seq) {
			s.clearSeq(seq)
			return evicted, err
		}
		evicted++
	}
	if lo, hi := seqPosRange(s.lctx, seq); lo != 0 || hi != len(toks)-1 {
		s.clearSeq(seq)
		return evicted, fmt.Errorf("the state holds positions %d..%d, not the %d tokens given", lo, hi, len(toks))
	}
	s.seqs[seq] = slices.Clone(toks)
	return evicted, nil
}

// keepAfter keeps req.Seq's state under req.KeepAs once a generate's
// answer is sent (not a cancelled one: no one waits for it), and returns
// the names of the states kept then. A failure only means a later prompt
// reads what it would have read anyway, so it is logged, not returned. A
// model that keeps no states (load) ignores KeepAs.
func (s *server) keepAfter(req wire.Request, cancelled bool) []string {
	if s.kept == nil {
		return nil
	}
	if req.KeepAs != "" && !cancelled {
		if err := s.keep(req.Seq, req.KeepAs); err != nil {
			fmt.Fprintf(os.Stderr, "runner: keep sequence %d as %q: %v\n", req.Seq, req.KeepAs, err)
		}
	}
	names := make([]string, 0, len(s.kept.byName))
	for el := s.kept.order.Front(); el != nil; el = el.Next() {
		names = append(names, el.Value.(*keptState).name)
	}
	return names
}
