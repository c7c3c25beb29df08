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
// transition on the manager's clock), for example, with a text handler:
//
//	level=WARN msg="fusebox: breaker state changed" breaker=payments from=closed to=open outcome=failure cause=trip at=2026-03-01T12:00:00.000Z
//
// The manager never waits for a subscriber: when the Logger falls behind
// and its buffer is full, events are dropped. The Logger notices the gap in
// the breaker's generation numbers when that breaker's next event arrives,
// and writes a DroppedMessage record saying how many were lost.
package eventlog

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
)

// The messages of the records a Logger writes.
const (
	// TransitionMessage is the message of the record of a transition.
	TransitionMessage = "fusebox: breaker state changed"
	// DroppedMessage is the message of the record that reports events lost
	// because the Logger's buffer was full; its attributes are breaker and
	// dropped (how many).
	DroppedMessage = "fusebox: breaker events dropped"
)

// firstGen is the generation of a breaker that has made no transition yet:
// its first transition's event carries firstGen+1.
const firstGen = 1

// Options configure a Logger. The zero value is valid.
type Options struct {
	// Logger receives the records. Nil means slog.Default().
	Logger *slog.Logger
	// Buffer is how many events may wait for the Logger before the manager
	// drops them. Below 1 means manager.DefaultSubscribeBuffer.
	Buffer int
	// Level returns the level of a transition's record. Nil means
	// DefaultLevel.
	Level func(manager.Event) slog.Level
}

// DefaultLevel is the level of a transition's record when Options.Level is
// nil: slog.LevelWarn when the breaker opens (it tripped, a probe failed,
// or it was forced open), slog.LevelInfo otherwise.
func DefaultLevel(ev manager.Event) slog.Level {
	if ev.Transition.To == breaker.Open {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// Logger writes the transitions of a manager's breakers to a slog.Logger,
// from a goroutine of its own. Create one with Start and end it with Close.
type Logger struct {
	log         *slog.Logger
	level       func(manager.Event) slog.Level
	events      <-chan manager.Event
	unsubscribe func()
	done        chan struct{}
	dropped     atomic.Uint64

	// last is, per breaker, the highest generation seen; owned by run.
	last map[string]uint64
}

// Start subscribes to m's events and starts writing them to opts.Logger. It
// fails only if m is nil. On a manager that has already stopped, it returns
// a Logger that is already done.
func Start(m *manager.Manager, opts Options) (*Logger, error) {
	if m == nil {
		return nil, errors.New("fusebox: eventlog.Start: the manager is nil")
	}
	l := &Logger{
		log:   opts.Logger,
		level: opts.Level,
		done:  make(chan struct{}),
		last:  make(map[string]uint64),
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.level == nil {
		l.level = DefaultLevel
	}
	l.events, l.unsubscribe = m.Subscribe(opts.Buffer)
	// The generations the breakers registered so far have reached, taken
	// after subscribing: an event still on its way may be older, but none
	// is missed.
	for _, b := range m.Breakers() {
		l.last[b.Name()] = b.Snapshot().Gen
	}
	go l.run()
	return l, nil
}

// Close ends the subscription, writes the events that were already
// delivered, and returns once the Logger's goroutine has returned. Calling
// it more than once, or after the manager stopped, does nothing more. Close
// must not be called from the slog handler the Logger writes to.
func (l *Logger) Close() {
	l.unsubscribe()
	<-l.done
}

// Done returns a channel that is closed once the Logger has written its
// last record: after Close, or after the manager stopped.
func (l *Logger) Done() <-chan struct{} { return l.done }

// Dropped returns how many events the Logger has found missing so far. A
// loss is found when the next event of the same breaker arrives, so events
// dropped just before the Logger stops may not be counted.
func (l *Logger) Dropped() uint64 { return l.dropped.Load() }

func (l *Logger) run() {
	defer close(l.done)
	for ev := range l.events {
		l.write(ev)
	}
}

func (l *Logger) write(ev manager.Event) {
	ctx := context.Background()
	if ev.Gen != 0 {
		last, seen := l.last[ev.Name]
		if !seen {
			last = firstGen
		}
		if ev.Gen > last+1 {
			n := ev.Gen - last - 1
			l.dropped.Add(n)
			l.log.LogAttrs(ctx, slog.LevelWarn, DroppedMessage,
				slog.String("breaker", ev.Name), slog.Uint64("dropped", n))
		}
		l.last[ev.Name] = max(ev.Gen, last)
	}
	l.log.LogAttrs(ctx, l.level(ev), TransitionMessage,
		slog.String("breaker", ev.Name),
		slog.String("from", ev.Transition.From.String()),
		slog.String("to", ev.Transition.To.String()),
		slog.String("outcome", ev.Outcome.String()),
		slog.String("cause", ev.Cause.String()),
		slog.Time("at", ev.At),
	)
}
