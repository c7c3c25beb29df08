package manager

import (
	"errors"
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/machine"
)

type reconfigureReq struct {
	b           *Breaker
	cfg         Config // checked, with the defaults filled in
	nilSucceeds bool
	apply       func() // what the breaker's truth applies once the rest is, if anything
	reply       chan error
}

// Reconfigure replaces the breaker's Config while calls go on. cfg is
// checked as Register checks it, with the same errors (naming the breaker
// and the field), and a Config that fails changes nothing; the zero values
// mean the same defaults as for Register.
//
//   - A Strategy other than the current one counts from a fresh window. A
//     closed breaker starts the window at once, in a new generation: the
//     outcome of a call admitted before lands in the old window and counts
//     as stale, as any outcome from before a transition does. An open or
//     probing breaker keeps its state, its timer and its probe; its next
//     closed period counts with the new Strategy. The same Strategy (an
//     equal value) keeps the window and its counts.
//   - A Recover other than the current one is Init-ed, and its Timeout
//     decides the next timer; a timer already running keeps its length.
//     The same Recover keeps its state.
//   - The Classifier takes every release from then on, that of a call in
//     flight included.
//   - SlowCall times every call acquired from then on; a call in flight
//     when it changes is measured against the new SlowCall if it was timed
//     when acquired, and is not slow otherwise.
//   - SlowStart applies from the next recovery; a slow start that runs is
//     measured against the new SlowStart from its start, so it ends at
//     once if that end is past or SlowStart is now zero. A new Strategy
//     does not end a slow start.
//   - The Store cannot change, nor, for a shared breaker, the Fallback,
//     nor what the store's layout of the breaker depends on: the kind of
//     Strategy, and a breaker.TimeWindow's Period and Buckets. The error
//     names the field; remove the breaker and register it again instead.
//     A shared breaker's thresholds may change (Consecutive.Failures,
//     TimeWindow.Rate and MinCalls, Config.Quorum): the store's counts go
//     on, and this process judges them by the new thresholds from then
//     on. Other processes keep their own until they are reconfigured too:
//     while they disagree, the fleet opens as soon as the process with the
//     lowest threshold finds the shared count reaching it.
//
// Subscribers get an event of kind EventReconfigured, and the manager logs
// the change. Its Gen is that of the fresh window for a closed breaker given
// a new Strategy, else the generation of the breaker's last event. It
// returns ErrRemoved once the breaker is removed, ErrStopped once the
// manager has stopped. Reconfigure must not be called from a callback the
// manager runs (Recover.Init, Recover.Timeout).
func (b *Breaker) Reconfigure(cfg Config) error {
	if s := b.mach.Snapshot(); s.Halted {
		return b.haltedErr(s)
	}
	name := b.Name()
	custom := cfg.Classify
	cfg, err := validateConfig(opReconfigure, name, cfg)
	if err != nil {
		return err
	}
	apply, err := b.truth.reconfigure(b, cfg)
	if err != nil {
		return err
	}
	req := reconfigureReq{b: b, cfg: cfg, nilSucceeds: custom == nil, apply: apply, reply: make(chan error, 1)}
	select {
	case b.mgr.reconfigurec <- req:
	case <-b.mgr.done:
		return ErrStopped
	}
	return awaitReply(b.mgr, req.reply, ErrStopped)
}

// unchangeable is Reconfigure's error for a field of cfg that the breaker
// cannot change; why says where.
func (b *Breaker) unchangeable(field, why string) error {
	return configError(opReconfigure, b.Name(), field, errors.New("cannot change "+why+"; remove the breaker and register it again"))
}

// setClassifier makes fn the breaker's Classifier; nilSucceeds says that
// fn is classify.Default. A release that runs meanwhile classifies as the
// old Classifier or as the new one: either may read nilSucceeds, and both
// map nil to Success when it is set.
func (b *Breaker) setClassifier(fn classify.Classifier, nilSucceeds bool) {
	if nilSucceeds {
		// classify.Default: one holder shared by every breaker that
		// uses it, rather than one allocated for each.
		b.classify.Store(&defaultClassifier)
	} else {
		b.classify.Store(&fn)
	}
	b.nilSucceeds.Store(nilSucceeds)
}

// defaultClassifier holds classify.Default for every breaker whose Config
// leaves Classify nil. Nothing writes it.
var defaultClassifier classify.Classifier = classify.Default

// reconfigure is Reconfigure on the loop. Everything that can fail is
// done before anything changes.
func (m *Manager) reconfigure(req reconfigureReq) {
	b, cfg := req.b, req.cfg
	if b.removed {
		req.reply <- removedError{name: b.Name()}
		return
	}
	name := b.Name()
	newRecover := !sameValue(cfg.Recover, b.rec)
	var recState any
	if newRecover {
		var st any
		var err error
		m.callback(b, "Recover.Init", func() { st, err = initPolicy(cfg.Recover) })
		if err != nil {
			req.reply <- configError(opReconfigure, name, "Recover", err)
			return
		}
		recState = st
	}
	now := m.clk.Now()
	var step machine.Step
	var fresh bool
	if !sameValue(cfg.Strategy, b.mach.Strategy()) {
		var err error
		if step, fresh, err = b.mach.Reconfigure(cfg.Strategy, now); err != nil {
			req.reply <- configError(opReconfigure, name, "Strategy", err)
			return
		}
	}
	if newRecover {
		b.rec, b.recState = cfg.Recover, recState
	}
	b.setClassifier(cfg.Classify, req.nilSucceeds)
	b.setTiming(cfg)
	b.mach.SetSlowStart(cfg.SlowStart, now)
	if s := b.mach.Snapshot(); s.SlowStarting() {
		// A new length may end it before the tick armed for the old.
		m.slowStartTicks(b, s.Gen, now)
	}
	b.dryRun.Store(cfg.DryRun)
	if req.apply != nil {
		req.apply()
	}
	if fresh {
		m.handleNote(note{b: b, step: step, kind: EventReconfigured})
	} else {
		m.emitKind(b, machine.Step{Gen: b.nextGen - 1, At: now}, EventReconfigured, time.Time{})
	}
	m.logInfo("fusebox: breaker reconfigured", "breaker", name,
		"strategy", fmt.Sprintf("%T%+v", cfg.Strategy, cfg.Strategy), "recover", fmt.Sprintf("%T", cfg.Recover),
		"fresh_window", fresh, "new_recover", newRecover, "dry_run", cfg.DryRun)
	req.reply <- nil
}
