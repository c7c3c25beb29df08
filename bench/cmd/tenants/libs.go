package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/sony/gobreaker/v2"
)

const (
	tripAfter = 5
	openFor   = time.Hour
)

var errBoom = errors.New("boom")

func okAny() (any, error)   { return nil, nil }
func failAny() (any, error) { return nil, errBoom }

// makers are the libraries measured, gobreaker first: the ratios are to it.
func makers() []libMaker {
	return []libMaker{
		{"gobreaker", func() lib { return &gobreakerLib{} }},
		{"failsafe-go", func() lib { return &failsafeLib{} }},
		{"fusebox", func() lib { return newFuseboxLib() }},
		{"fusebox group", func() lib { return newGroupLib() }},
	}
}

// gobreakerLib is gobreaker v2's CircuitBreaker in a map by name.
type gobreakerLib struct {
	byName map[string]*gobreaker.CircuitBreaker[any]
	list   []*gobreaker.CircuitBreaker[any]
}

func (l *gobreakerLib) register(names []string) {
	l.byName = make(map[string]*gobreaker.CircuitBreaker[any])
	for _, name := range names {
		l.byName[name] = gobreaker.NewCircuitBreaker[any](gobreaker.Settings{
			Name:    name,
			Timeout: openFor,
			ReadyToTrip: func(c gobreaker.Counts) bool {
				return c.ConsecutiveFailures >= tripAfter
			},
		})
	}
}

func (l *gobreakerLib) handles(names []string) {
	l.list = make([]*gobreaker.CircuitBreaker[any], len(names))
	for i, name := range names {
		l.list[i] = l.byName[name]
	}
}

func (l *gobreakerLib) callHandles(idx []uint32) {
	for _, i := range idx {
		l.list[i].Execute(okAny)
	}
}

func (l *gobreakerLib) callNames(names []string, idx []uint32) {
	for _, i := range idx {
		l.byName[names[i]].Execute(okAny)
	}
}

func (l *gobreakerLib) hot(n int) {
	cb := l.list[0]
	for range n {
		cb.Execute(okAny)
	}
}

func (l *gobreakerLib) trip(idx []int) {
	for _, i := range idx {
		for range tripAfter {
			l.list[i].Execute(failAny)
		}
	}
}

func (l *gobreakerLib) remove(names []string) {
	for _, name := range names {
		delete(l.byName, name)
	}
}

func (l *gobreakerLib) close() {}

// failsafeLib is failsafe-go's standalone CircuitBreaker in a map by name.
type failsafeLib struct {
	byName map[string]circuitbreaker.CircuitBreaker[any]
	list   []circuitbreaker.CircuitBreaker[any]
}

func (l *failsafeLib) register(names []string) {
	l.byName = make(map[string]circuitbreaker.CircuitBreaker[any])
	for _, name := range names {
		l.byName[name] = circuitbreaker.NewBuilder[any]().
			WithFailureThreshold(tripAfter).
			WithSuccessThreshold(1).
			WithDelay(openFor).
			Build()
	}
}

func (l *failsafeLib) handles(names []string) {
	l.list = make([]circuitbreaker.CircuitBreaker[any], len(names))
	for i, name := range names {
		l.list[i] = l.byName[name]
	}
}

func (l *failsafeLib) callHandles(idx []uint32) {
	for _, i := range idx {
		if cb := l.list[i]; cb.TryAcquirePermit() {
			cb.RecordSuccess()
		}
	}
}

func (l *failsafeLib) callNames(names []string, idx []uint32) {
	for _, i := range idx {
		if cb := l.byName[names[i]]; cb.TryAcquirePermit() {
			cb.RecordSuccess()
		}
	}
}

func (l *failsafeLib) hot(n int) {
	cb := l.list[0]
	for range n {
		if cb.TryAcquirePermit() {
			cb.RecordSuccess()
		}
	}
}

func (l *failsafeLib) trip(idx []int) {
	for _, i := range idx {
		cb := l.list[i]
		for range tripAfter {
			if cb.TryAcquirePermit() {
				cb.RecordFailure()
			}
		}
	}
}

func (l *failsafeLib) remove(names []string) {
	for _, name := range names {
		delete(l.byName, name)
	}
}

func (l *failsafeLib) close() {}

// fuseboxLib is one fusebox manager, whose registry is its own: Register,
// Manager.Breaker by name, Manager.Remove.
type fuseboxLib struct {
	m    *manager.Manager
	list []*manager.Breaker
}

var quiet = slog.New(slog.DiscardHandler)

func newFuseboxLib() *fuseboxLib {
	return &fuseboxLib{m: manager.Start(manager.Options{Logger: quiet})}
}

var fuseboxConfig = manager.Config{
	Strategy: breaker.Consecutive{Failures: tripAfter},
	Recover:  recover.BasicTimeout{Open: openFor},
}

func (l *fuseboxLib) register(names []string) {
	for _, name := range names {
		if _, err := l.m.Register(name, fuseboxConfig); err != nil {
			panic(err)
		}
	}
}

func (l *fuseboxLib) handles(names []string) {
	l.list = make([]*manager.Breaker, len(names))
	for i, name := range names {
		l.list[i], _ = l.m.Breaker(name)
	}
}

func call(b *manager.Breaker) {
	if p, err := b.Acquire(context.Background()); err == nil {
		p.Release(nil)
	}
}

func (l *fuseboxLib) callHandles(idx []uint32) {
	for _, i := range idx {
		call(l.list[i])
	}
}

func (l *fuseboxLib) callNames(names []string, idx []uint32) {
	for _, i := range idx {
		b, _ := l.m.Breaker(names[i])
		call(b)
	}
}

func (l *fuseboxLib) hot(n int) {
	b := l.list[0]
	for range n {
		call(b)
	}
}

func (l *fuseboxLib) trip(idx []int) {
	ctx := context.Background()
	for _, i := range idx {
		b := l.list[i]
		for range tripAfter {
			if p, err := b.Acquire(ctx); err == nil {
				p.Release(errBoom)
			}
		}
	}
	l.m.Sync()
}

func (l *fuseboxLib) remove(names []string) {
	for _, name := range names {
		l.m.Remove(name)
	}
}

func (l *fuseboxLib) close() { l.m.Stop() }

// groupLib is one fusebox manager's Group: Group.Get of a new key, and of
// a key that exists by name, Manager.Remove.
type groupLib struct {
	fuseboxLib
	g *manager.Group
}

func newGroupLib() *groupLib {
	l := &groupLib{fuseboxLib: *newFuseboxLib()}
	g, err := l.m.Group("t", fuseboxConfig, manager.GroupOptions{})
	if err != nil {
		panic(err)
	}
	l.g = g
	return l
}

func (l *groupLib) register(names []string) {
	for _, name := range names {
		if _, err := l.g.Get(name); err != nil {
			panic(err)
		}
	}
}

func (l *groupLib) handles(names []string) {
	l.list = make([]*manager.Breaker, len(names))
	for i, name := range names {
		l.list[i], _ = l.g.Get(name)
	}
}

func (l *groupLib) callNames(names []string, idx []uint32) {
	for _, i := range idx {
		b, _ := l.g.Get(names[i])
		call(b)
	}
}

func (l *groupLib) remove(names []string) {
	for _, name := range names {
		l.m.Remove("t/" + name)
	}
}
