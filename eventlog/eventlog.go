// Package eventlog writes one log line per breaker transition, for programs
// that have no metrics system: a Logger subscribes to a manager's events and
// hands each one to a log/slog Logger.
//
//	l, err := eventlog.Start(m, eventlog.Options{Logger: logger})
//	if err != nil { ... }
//	defer l.Close()
//
// Each transition becomes a record with the message TransitionMessage and
// the attributes breaker, from, to, outcome, cause and at (the time of the
// transition on the manager's clock), and, for an opening whose call
// returned an error, err: why it opened (manager.Event.Err). For example,
// with a text handler:
//
//	level=WARN msg="fusebox: breaker state changed" breaker=payments from=closed to=open outcome=failure cause=trip at=2026-03-01T12:00:00.000Z err="dial tcp 10.0.0.7:443: connect: connection refused"
//
// and, in another process of a fleet sharing the breaker:
//
//	level=WARN msg="fusebox: breaker state changed" breaker=payments from=closed to=open outcome=none cause=shared at=2026-03-01T12:00:00.004Z err="opened by web-7: dial tcp 10.0.0.7:443: connect: connection refused"
//
// Events that are not transitions (a store link lost or restored, a breaker
// removed, reconfigured or halted) become a record with the message
// EventMessage and the attributes breaker, kind and at.
//
// The manager never waits for a subscriber: when the Logger falls behind
// and its buffer is full, events are dropped. The manager reports the loss
// with that breaker's next event, and the Logger writes a DroppedMessage
// record saying how many were lost before it.
package eventlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/watch"
	"github.com/fusebox-go/fusebox/manager"
)

// The messages of the records a Logger writes.
const (
	// TransitionMessage is the message of the record of a transition.
	TransitionMessage = "fusebox: breaker state changed"
	// EventMessage is the message of the record of an event that is not a
	// transition; its attributes are breaker, kind (manager.EventKind's
	// String) and at.
	EventMessage = "fusebox: breaker event"
	// DroppedMessage is the message of the record that reports events lost
	// because the Logger's buffer was full; its attributes are breaker and
	// dropped (how many).
	DroppedMessage = "fusebox: breaker events dropped"
)

// Options configure a Logger. The zero value is valid.
type Options struct {
	// Logger receives the records. Nil means slog.Default().
	Logger *slog.Logger
	// Buffer is how many events may wait for the Logger before the manager
	// drops them. Below 1 means 64; above 262,144 (1<<18) is an
	// error.
	Buffer int
	// Level returns the level of a transition's record. Nil means
	// DefaultLevel.
	Level func(manager.Event) slog.Level
}

// DefaultLevel is the level of a transition's record when Options.Level is
// nil: slog.LevelWarn when the breaker opens (it tripped, a probe failed,
// or it was forced open), loses its store, halts, or its quorum cannot be
// met (manager.EventQuorumShort), slog.LevelInfo otherwise.
func DefaultLevel(ev manager.Event) slog.Level {
	switch {
	case ev.Kind == manager.EventTransition && ev.Transition.To == breaker.Open,
		ev.Kind == manager.EventStoreLost, ev.Kind == manager.EventHalted, ev.Kind == manager.EventQuorumShort:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// Logger writes the events of a manager's breakers to a slog.Logger, from
// a goroutine of its own. Create one with Start and end it
// with Close.
type Logger struct {
	log   *slog.Logger
	level func(manager.Event) slog.Level
	w     *watch.Watch
}

// Start watches m's events and starts writing them to opts.Logger. It
// fails if m is nil or opts.Buffer is above 262,144 (1<<18). On
// a manager that has already stopped, it returns a Logger that is already
// done.
func Start(m *manager.Manager, opts Options) (*Logger, error) {
	if m == nil {
		return nil, errors.New("fusebox: eventlog.Start: the manager is nil")
	}
	l := &Logger{log: opts.Logger, level: opts.Level}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.level == nil {
		l.level = DefaultLevel
	}
	w, err := watch.Start(m, opts.Buffer, l.write)
	if err != nil {
		return nil, fmt.Errorf("fusebox: eventlog.Start: Options.Buffer: %w", err)
	}
	l.w = w
	return l, nil
}

// Close ends the subscription, writes the events that were already
// delivered, and returns once the Logger's goroutine has returned. Calling
// it more than once, or after the manager stopped, does nothing more. Close
// must not be called from the slog handler the Logger writes to.
func (l *Logger) Close() { l.w.Close() }

// Done returns a channel that is closed once the Logger has written its
// last record: after Close, or after the manager stopped.
func (l *Logger) Done() <-chan struct{} { return l.w.Done() }

// Dropped returns how many events the manager dropped for the Logger
// because its buffer was full, as reported so far: a loss is reported with
// the breaker's next event, after a DroppedMessage record.
func (l *Logger) Dropped() uint64 { return l.w.Dropped() }

func (l *Logger) write(batch []manager.Event) {
	ctx := context.Background()
	for _, ev := range batch {
		if ev.Missed > 0 {
			l.log.LogAttrs(ctx, slog.LevelWarn, DroppedMessage,
				slog.String("breaker", ev.Name), slog.Uint64("dropped", ev.Missed))
		}
		if ev.Kind != manager.EventTransition {
			l.log.LogAttrs(ctx, l.level(ev), EventMessage,
				slog.String("breaker", ev.Name),
				slog.String("kind", ev.Kind.String()),
				slog.Time("at", ev.At),
			)
			continue
		}
		attrs := [...]slog.Attr{
			slog.String("breaker", ev.Name),
			slog.String("from", ev.Transition.From.String()),
			slog.String("to", ev.Transition.To.String()),
			slog.String("outcome", ev.Outcome.String()),
			slog.String("cause", ev.Cause.String()),
			slog.Time("at", ev.At),
			{},
		}
		n := len(attrs) - 1
		if ev.Err != nil {
			// Why it opened: the error of the call that opened it, or,
			// for a shared breaker another process opened, that
			// process's name and its error.
			attrs[n] = slog.String("err", ev.Err.Error())
			n++
		}
		l.log.LogAttrs(ctx, l.level(ev), TransitionMessage, attrs[:n]...)
	}
}
