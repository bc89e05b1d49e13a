package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestQueueOrder(t *testing.T) {
	q := NewQueue(0)
	release, _, err := q.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	start := func(name string, p Priority, queued int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rel, _, err := q.Acquire(WithPriority(context.Background(), p))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			rel()
		}()
		// Let it enqueue before the next one, so FIFO order is defined.
		eventually(t, fmt.Sprintf("%s queued", name), func() bool { return q.Stats().Waiting >= queued })
	}
	start("bg1", Background, 1)
	start("bg2", Background, 2)
	start("ask", Interactive, 3)
	if got := q.Stats().Waiting; got != 3 {
		t.Fatalf("waiting = %d, want 3", got)
	}
	release()
	wg.Wait()
	want := []string{"ask", "bg1", "bg2"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order = %v, want %v", order, want)
		}
	}
	if s := q.Stats(); s.Busy || s.Waiting != 0 || s.Served != 4 {
		t.Fatalf("stats after = %+v", s)
	}
}

func TestQueueCapacityAndCancel(t *testing.T) {
	q := NewQueue(1)
	release, _, _ := q.Acquire(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { _, _, err := q.Acquire(ctx); done <- err }()
	eventually(t, "the second caller queued", func() bool { return q.Stats().Waiting == 1 })
	if _, _, err := q.Acquire(context.Background()); !errors.Is(err, ErrBusy) {
		t.Fatalf("over capacity: err = %v, want ErrBusy", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: err = %v", err)
	}
	release()
	rel, waited, err := q.Acquire(context.Background())
	if err != nil || waited != 0 {
		t.Fatalf("free queue: waited %v err %v", waited, err)
	}
	rel()
}

func TestQueuePreemptible(t *testing.T) {
	cases := []struct {
		name      string
		holder    Priority
		waiter    Priority
		preempted bool
	}{
		{"interactive preempts background", Background, Interactive, true},
		{"background does not preempt background", Background, Background, false},
		{"interactive does not preempt interactive", Interactive, Interactive, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := NewQueue(0)
			hold, release, _, err := q.AcquirePreemptible(WithPriority(context.Background(), c.holder))
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan struct{})
			go func() {
				rel, _, err := q.Acquire(WithPriority(context.Background(), c.waiter))
				if err == nil {
					rel()
				}
				close(served)
			}()
			eventually(t, "the waiter queued", func() bool { return q.Stats().Waiting == 1 })
			// A waiter preempts as it queues, under the queue's lock: once
			// it counts as waiting, the holder's context says whether it
			// was preempted, and nothing later changes that.
			switch preempted := hold.Err() != nil; {
			case preempted && !c.preempted:
				t.Fatal("holder preempted by a waiter of no higher priority")
			case !preempted && c.preempted:
				t.Fatal("holder not preempted")
			case preempted && !errors.Is(context.Cause(hold), ErrPreempted):
				t.Errorf("cause = %v, want ErrPreempted", context.Cause(hold))
			}
			release()
			release() // a second call is harmless
			<-served
			if s := q.Stats(); s.Busy || s.Waiting != 0 {
				t.Errorf("queue after: %+v", s)
			}
			// Released normally, the context is cancelled without a cause
			// of preemption.
			if !c.preempted && errors.Is(context.Cause(hold), ErrPreempted) {
				t.Error("released holder's cause is ErrPreempted")
			}
		})
	}
}

// TestQueueReserve: a reservation preempts lower reading at once, holds
// lower work back while it lasts (even on a free queue) and lets work of
// its own priority through; when it ends, the held-back work runs. The
// queue hands its turn over under its lock, so its stats say at once
// whether a waiter was let through.
func TestQueueReserve(t *testing.T) {
	q := NewQueue(0)
	bg := WithPriority(context.Background(), Background)
	hold, release, _, err := q.AcquirePreemptible(bg)
	if err != nil {
		t.Fatal(err)
	}
	end := q.Reserve(context.Background()) // interactive
	if !errors.Is(context.Cause(hold), ErrPreempted) {
		t.Fatalf("reading ahead not preempted by the reservation: cause %v", context.Cause(hold))
	}
	release()

	got := make(chan struct{})
	go func() {
		rel, _, err := q.Acquire(bg)
		if err != nil {
			t.Error(err)
			return
		}
		close(got)
		rel()
	}()
	eventually(t, "background work queued", func() bool { return q.Stats().Waiting == 1 })
	heldBack := func(when string) {
		t.Helper()
		if s := q.Stats(); s.Busy || s.Waiting != 1 {
			t.Fatalf("%s: %+v, want background work waiting on a free queue", when, s)
		}
	}
	heldBack("reserved")
	// A held-back waiter that gives up leaves the queue as it was.
	gaveUp, cancel := context.WithCancel(bg)
	cancel()
	if _, _, err := q.Acquire(gaveUp); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled held-back waiter: %v", err)
	}
	heldBack("after a held-back waiter gave up")
	// The question itself goes first (held back, it would wait forever).
	done := make(chan error, 1)
	go func() {
		rel, _, err := q.Acquire(context.Background())
		if err == nil {
			rel()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("interactive work held back by its own reservation")
	}
	heldBack("after the question's turn")
	end()
	end() // a second call is harmless
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("background work still held back after the reservation")
	}
	eventually(t, "the background work released the queue", func() bool { return !q.Stats().Busy })
}

// eventually polls cond every millisecond until it holds, and fails the
// test naming what it waited for if it does not within a minute. It waits
// for an event; it measures nothing (a loaded machine only polls longer).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after a minute: %s", what)
		}
	}
}
