package engine

import (
	"context"
	"errors"
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
		for q.Stats().Waiting < queued {
			time.Sleep(time.Millisecond)
		}
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
	for q.Stats().Waiting != 1 {
		time.Sleep(time.Millisecond)
	}
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
			for q.Stats().Waiting != 1 {
				time.Sleep(time.Millisecond)
			}
			select {
			case <-hold.Done():
				if !c.preempted {
					t.Fatal("holder preempted by a waiter of no higher priority")
				}
				if !errors.Is(context.Cause(hold), ErrPreempted) {
					t.Errorf("cause = %v, want ErrPreempted", context.Cause(hold))
				}
			case <-time.After(50 * time.Millisecond):
				if c.preempted {
					t.Fatal("holder not preempted")
				}
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
