package relay

import (
	"context"
	"testing"
	"time"
)

func qitem(n int, command bool) ingestItem {
	it := ingestItem{msg: &Message{Raw: make([]byte, n)}, size: n}
	if command {
		it.fn = func() {}
	}
	return it
}

// take hands over consecutive events up to a command, and a command alone.
func TestIngestQueueBatchesUpToACommand(t *testing.T) {
	t.Parallel()
	q := newIngestQueue(1 << 20)
	ctx := context.Background()
	for _, it := range []ingestItem{qitem(1, false), qitem(2, false), qitem(3, true), qitem(4, false), qitem(5, false), qitem(6, false)} {
		q.push(ctx, it)
	}
	q.close()
	var got [][]int
	for {
		items, ok := q.take(2)
		if !ok {
			break
		}
		var sizes []int
		for _, it := range items {
			sizes = append(sizes, len(it.msg.Raw))
		}
		got = append(got, sizes)
		q.done(items)
	}
	want := [][]int{{1, 2}, {3}, {4, 5}, {6}}
	if len(got) != len(want) {
		t.Fatalf("batches %v, want %v", got, want)
	}
	for i := range want {
		if len(got[i]) != len(want[i]) || got[i][0] != want[i][0] || got[i][len(got[i])-1] != want[i][len(want[i])-1] {
			t.Fatalf("batches %v, want %v", got, want)
		}
	}
}

// A reader that gets a bound's worth ahead of the ingester waits until the
// ingester has handed bytes on; an event larger than the bound passes
// alone; a socket going away releases a waiting reader.
func TestIngestQueueBoundsBytes(t *testing.T) {
	t.Parallel()
	q := newIngestQueue(100)
	ctx := context.Background()
	q.push(ctx, qitem(60, false))
	pushed := make(chan struct{})
	go func() { q.push(ctx, qitem(60, false)); close(pushed) }()
	select {
	case <-pushed:
		t.Fatal("a push past the bound did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	items, _ := q.take(10)
	select {
	case <-pushed:
		t.Fatal("a push went through while the taken bytes were still being ingested")
	case <-time.After(50 * time.Millisecond):
	}
	q.done(items)
	<-pushed
	items, _ = q.take(10)
	q.done(items)

	q.push(ctx, qitem(500, false)) // larger than the bound, queue empty: passes
	gone, cancel := context.WithCancel(ctx)
	released := make(chan struct{})
	go func() { q.push(gone, qitem(1, false)); close(released) }()
	cancel()
	<-released
	items, _ = q.take(10)
	if len(items) != 1 || len(items[0].msg.Raw) != 500 {
		t.Fatalf("queue holds %d items after a cancelled push", len(items))
	}
}
