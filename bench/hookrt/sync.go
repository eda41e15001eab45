package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// syncAdapter is an adapter in one sync mode, counting its log syncs.
type syncAdapter struct {
	mode  syncmode.Mode
	home  string
	addr  string
	syncs atomic.Int64
}

func startSyncAdapter(ctx context.Context, dir string, mode syncmode.Mode) (*syncAdapter, error) {
	a := &syncAdapter{mode: mode, home: filepath.Join(dir, string(mode))}
	srv, err := adapter.NewServer(adapter.Config{Config: emitter.Config{Home: a.home, Posture: mapping.DefaultPosture(),
		Sync: mode, Syncer: func(f *os.File) error { a.syncs.Add(1); return syncmode.FileSync(f) },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, Listen: "127.0.0.1:0"})
	if err != nil {
		return nil, err
	}
	addr, err := srv.Listen()
	if err != nil {
		return nil, err
	}
	go srv.Run(ctx) //nolint:errcheck // a benchmark adapter
	<-srv.Ready()
	a.addr = addr.String()
	return a, nil
}

// runSync measures what syncing before the ack (AEP_LOG_SYNC=always) adds
// to a hook when k spawners run hooks at once, against the same hooks acked
// once written (interval): two adapters, the modes alternating in blocks
// so drift hits both alike. The spawners share one session (Kimi's
// parallel tool calls) or each have their own (several Kimi sessions).
func runSync(spawners string, n int, hookBin string) error {
	var ks []int
	for _, f := range strings.Split(spawners, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 {
			return fmt.Errorf("-sync %q: want spawner counts such as 1,4,8", spawners)
		}
		ks = append(ks, k)
	}
	tmp, err := os.MkdirTemp("", "hookrt-sync")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if hookBin, err = buildHook(tmp, hookBin); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var adapters []*syncAdapter
	for _, m := range []syncmode.Mode{syncmode.Always, syncmode.Interval} {
		a, err := startSyncAdapter(ctx, tmp, m)
		if err != nil {
			return err
		}
		adapters = append(adapters, a)
	}
	const blocks = 10
	fmt.Printf("hooks from k spawners at once (UserPromptSubmit through /bin/sh -c), %d per spawner per mode, modes alternating in %d blocks\n\n", n, blocks)
	fmt.Println("| spawners | sessions | always: median | interval: median | always − interval | log syncs per hook (always) | hooks/s always / interval |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, k := range ks {
		for _, shared := range []bool{true, false} {
			lat := make([][]time.Duration, len(adapters))
			wall := make([]time.Duration, len(adapters))
			before := adapters[0].syncs.Load()
			for b := 0; b < blocks; b++ {
				for i, a := range adapters {
					d, w, err := burst(a, hookBin, k, max(n/blocks, 1), shared)
					if err != nil {
						return err
					}
					lat[i] = append(lat[i], d...)
					wall[i] += w
				}
			}
			syncs := adapters[0].syncs.Load() - before
			sessions := "one"
			if !shared {
				sessions = "one each"
			}
			ma, mi := median(lat[0]), median(lat[1])
			fmt.Printf("| %d | %s | %s | %s | %+.2f ms | %.2f | %.0f / %.0f |\n", k, sessions, ms(ma), ms(mi), float64(ma-mi)/1e6,
				float64(syncs)/float64(len(lat[0])), float64(len(lat[0]))/wall[0].Seconds(), float64(len(lat[1]))/wall[1].Seconds())
		}
	}
	return nil
}

// burst runs k spawners of m hooks each against a and returns every
// hook's round trip and the burst's wall time.
func burst(a *syncAdapter, hookBin string, k, m int, shared bool) ([]time.Duration, time.Duration, error) {
	cmd := fmt.Sprintf("%s --daemon http://%s --home %s", hookBin, a.addr, a.home)
	var mu sync.Mutex
	var all []time.Duration
	var first error
	var wg sync.WaitGroup
	start := time.Now()
	for s := 0; s < k; s++ {
		session := "bench-sync"
		if !shared {
			session = fmt.Sprintf("bench-sync-%d", s)
		}
		p := strings.Replace(payload, `"session_id":"bench"`, `"session_id":"`+session+`"`, 1)
		wg.Go(func() {
			for i := 0; i < m; i++ {
				d, _, _, err := spawn(cmd, p)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				all = append(all, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return all, time.Since(start), first
}
