// Package logging makes the daemons' loggers: text lines on one writer, at
// info or (verbose) debug level, with nested component names joined into
// one attribute.
package logging

import (
	"context"
	"io"
	"log/slog"
)

// New is a text logger writing to w at info level, or debug when verbose.
func New(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(newComponentHandler(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})))
}

// componentKey names the attribute that says which part of a daemon logs.
const componentKey = "component"

// componentHandler joins nested component names into one attribute: a
// logger made with With("component", "publisher") from one already carrying
// component=adapter logs component=adapter.publisher, once, rather than the
// attribute twice.
type componentHandler struct {
	base  slog.Handler // the handler without any attribute
	comp  string
	attrs []slog.Attr  // the other attributes, in order
	out   slog.Handler // base with component first, then attrs
}

func newComponentHandler(h slog.Handler) *componentHandler {
	return &componentHandler{base: h, out: h}
}

func (h *componentHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.out.Enabled(ctx, l)
}

func (h *componentHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.out.Handle(ctx, r)
}

func (h *componentHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := &componentHandler{base: h.base, comp: h.comp, attrs: append([]slog.Attr(nil), h.attrs...)}
	for _, a := range as {
		if a.Key != componentKey {
			n.attrs = append(n.attrs, a)
			continue
		}
		if c := a.Value.String(); n.comp == "" {
			n.comp = c
		} else {
			n.comp += "." + c
		}
	}
	all := n.attrs
	if n.comp != "" {
		all = append([]slog.Attr{slog.String(componentKey, n.comp)}, n.attrs...)
	}
	n.out = n.base.WithAttrs(all)
	return n
}

// WithGroup hands over to the plain handler: attributes inside a group are
// the group's, so a component named there is not the logger's.
func (h *componentHandler) WithGroup(name string) slog.Handler {
	return h.out.WithGroup(name)
}
