package fleet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/fleet"
	"github.com/fusebox-go/fusebox/store"
)

var (
	t0 = time.Date(2026, 1, 2, 15, 4, 0, 0, time.UTC)
	t1 = t0.Add(time.Second)
)

const (
	C = breaker.Closed
	O = breaker.Open
	H = breaker.HalfOpen
	P = breaker.Probing
)

func mir(st breaker.State, epoch uint64, until time.Time, holder bool) fleet.Mirror {
	return fleet.Mirror{State: st, Epoch: epoch, Until: until, Holder: holder}
}

// slow is a closed mirror in the fleet's slow start that ends at until.
func slow(epoch uint64, until time.Time) fleet.Mirror {
	return fleet.Mirror{State: C, Epoch: epoch, SlowUntil: until}
}

// lag is the Lag of the process "web-2", whose mirrors lagged makes.
var lag = fleet.Lag("web-2")

func lagged(st breaker.State, epoch uint64, until time.Time) fleet.Mirror {
	return fleet.Mirror{State: st, Epoch: epoch, Until: until, Self: "web-2", Lag: lag}
}

// Lag spreads the processes of a fleet over the 30ms before MaxLag, by
// name, past Tolerance.
func TestLag(t *testing.T) {
	if got := fleet.Lag(""); got != 0 {
		t.Errorf("Lag(\"\") = %v, want 0", got)
	}
	ms := map[time.Duration]bool{}
	for i := range 100 {
		l := fleet.Lag(fmt.Sprintf("web-%d-%d", i, 4000+i))
		if l < fleet.MaxLag-30*time.Millisecond || l >= fleet.MaxLag || l <= fleet.Tolerance {
			t.Errorf("Lag of process %d: %v, out of [MaxLag-30ms, MaxLag) or not past Tolerance", i, l)
		}
		ms[l.Truncate(time.Millisecond)] = true
	}
	if len(ms) < 20 {
		t.Errorf("100 processes' lags fall in %d milliseconds, want them spread over 20 at least", len(ms))
	}
	if fleet.Lag("web-2") != lag {
		t.Error("Lag is not a function of the name")
	}
}

func forced(epoch uint64) fleet.Mirror {
	return fleet.Mirror{State: O, Epoch: epoch, Forced: true}
}

func TestFollow(t *testing.T) {
	tests := []struct {
		name    string
		m       fleet.Mirror
		st      store.Status
		at, now time.Time
		want    fleet.Mirror
		changed bool
	}{
		{"an older epoch changes nothing (a late reply)", mir(C, 2, time.Time{}, false), store.Status{Epoch: 1, Open: time.Minute}, t0, t0, mir(C, 2, time.Time{}, false), false},
		{"an older epoch changes nothing (data lost)", mir(P, 5, t1, true), store.Status{Epoch: 0}, t0, t0, mir(P, 5, t1, true), false},
		{"a newer opened epoch: open until at+Open", mir(C, 2, time.Time{}, false), store.Status{Epoch: 3, Open: 10 * time.Second}, t0, t1, mir(O, 3, t0.Add(10*time.Second), false), true},
		{"a newer opened epoch whose period is over: half-open", mir(C, 2, time.Time{}, false), store.Status{Epoch: 3, Open: time.Second}, t0, t1, mir(H, 3, time.Time{}, false), true},
		{"a newer epoch with another's lease: probing", mir(C, 2, time.Time{}, false), store.Status{Epoch: 3, Probe: 5 * time.Second}, t0, t1, mir(P, 3, t0.Add(5*time.Second), false), true},
		{"a close the mirror missed", mir(O, 3, t1, false), store.Status{Epoch: 4}, t0, t0, mir(C, 4, time.Time{}, false), true},
		{"a missed close after a missed reopen", mir(H, 3, time.Time{}, false), store.Status{Epoch: 6}, t0, t0, mir(C, 6, time.Time{}, false), true},
		{"a newer epoch ends this process's lease", mir(P, 3, t1, true), store.Status{Epoch: 5, Open: time.Minute}, t0, t0, mir(O, 5, t0.Add(time.Minute), false), true},
		{"own closed epoch: a tripped mirror waits for its opening", mir(O, 2, t1, false), store.Status{Epoch: 2}, t0, t0, mir(O, 2, t1, false), false},
		{"own closed epoch: half-open after a local opening the store never saw", mir(H, 2, time.Time{}, false), store.Status{Epoch: 2}, t0, t0, mir(C, 2, time.Time{}, false), true},
		{"own closed epoch: closed stays closed", mir(C, 2, time.Time{}, false), store.Status{Epoch: 2}, t0, t0, mir(C, 2, time.Time{}, false), false},
		{"own epoch: an open period within tolerance", mir(O, 3, t0.Add(10*time.Second), false), store.Status{Epoch: 3, Open: 10*time.Second + 20*time.Millisecond}, t0, t0, mir(O, 3, t0.Add(10*time.Second), false), false},
		{"own epoch: an open period corrected", mir(O, 3, t0.Add(10*time.Second), false), store.Status{Epoch: 3, Open: 7 * time.Second}, t0, t0, mir(O, 3, t0.Add(7*time.Second), false), true},
		{"own epoch: still open in the store while half-open here", mir(H, 3, time.Time{}, false), store.Status{Epoch: 3, Open: time.Second}, t0, t0, mir(O, 3, t1, false), true},
		{"own epoch: another's lease while half-open", mir(H, 3, time.Time{}, false), store.Status{Epoch: 3, Probe: time.Second}, t0, t0, mir(P, 3, t1, false), true},
		{"own epoch: another's lease while still open here (the store's period is over)", mir(O, 3, t1, false), store.Status{Epoch: 3, Probe: time.Second}, t0, t0, mir(P, 3, t1, false), true},
		{"another's opening: open until at+Open+Lag", lagged(C, 2, time.Time{}), store.Status{Epoch: 3, Open: 10 * time.Second, Reason: store.Reason{By: "web-1"}}, t0, t0, lagged(O, 3, t0.Add(10*time.Second+lag)), true},
		{"this process's own opening: until at+Open", lagged(C, 2, time.Time{}), store.Status{Epoch: 3, Open: 10 * time.Second, Reason: store.Reason{By: "web-2"}}, t0, t0, lagged(O, 3, t0.Add(10*time.Second)), true},
		{"another's lease ends later by the Lag, the opener's too", lagged(C, 2, time.Time{}), store.Status{Epoch: 3, Probe: 5 * time.Second, Reason: store.Reason{By: "web-2"}}, t0, t0, lagged(P, 3, t0.Add(5*time.Second+lag)), true},
		{"own epoch: a period its own trip set is corrected to the Lag", lagged(O, 3, t0.Add(10*time.Second)), store.Status{Epoch: 3, Open: 10 * time.Second, Reason: store.Reason{By: "web-1"}}, t0, t0, lagged(O, 3, t0.Add(10*time.Second+lag)), true},
		{"own epoch: a lagged period within tolerance", lagged(O, 3, t0.Add(10*time.Second+lag)), store.Status{Epoch: 3, Open: 10*time.Second - 5*time.Millisecond, Reason: store.Reason{By: "web-1"}}, t0, t0, lagged(O, 3, t0.Add(10*time.Second+lag)), false},
		{"own epoch: the lease heard while the lag runs", lagged(O, 3, t0.Add(lag)), fleet.StatusOf(store.Change{Kind: store.Leased, Epoch: 3, Probe: time.Second}), t0, t0, lagged(P, 3, t1.Add(lag)), true},
		{"own epoch: the holder ignores its own lease", mir(P, 3, t1, true), store.Status{Epoch: 3, Probe: time.Second}, t0, t0, mir(P, 3, t1, true), false},
		{"own epoch: another's lease ended without a verdict", mir(P, 3, t1, false), store.Status{Epoch: 3}, t0, t0, mir(H, 3, time.Time{}, false), true},
		{"own epoch: the holder keeps its probe", mir(P, 3, t1, true), store.Status{Epoch: 3}, t0, t0, mir(P, 3, t1, true), false},
		{"a close with the fleet's slow start: it ends at at+SlowStart", mir(P, 3, t1, false), store.Status{Epoch: 4, SlowStart: 10 * time.Second}, t0, t1, slow(4, t0.Add(10*time.Second)), true},
		{"a close heard 4s into the slow start joins it where it stands", mir(H, 3, time.Time{}, false), store.Status{Epoch: 4, SlowStart: 6 * time.Second}, t0, t0, slow(4, t0.Add(6*time.Second)), true},
		{"a slow start over by now is none", mir(H, 3, time.Time{}, false), store.Status{Epoch: 4, SlowStart: time.Second}, t0, t1, mir(C, 4, time.Time{}, false), true},
		{"own closed epoch: a closed mirror keeps its own slow start", mir(C, 4, time.Time{}, false), store.Status{Epoch: 4, SlowStart: 5 * time.Second}, t0, t0, mir(C, 4, time.Time{}, false), false},
		{"own epoch: closed on its own while the store was away", mir(C, 3, time.Time{}, false), store.Status{Epoch: 3}, t0, t0, mir(H, 3, time.Time{}, false), true},
		{"own epoch: closed on its own, the fleet still open", mir(C, 3, time.Time{}, false), store.Status{Epoch: 3, Open: time.Second}, t0, t0, mir(O, 3, t1, false), true},
		{"own epoch: open here, period over in the store", mir(O, 3, t1, false), store.Status{Epoch: 3}, t0, t0, mir(O, 3, t1, false), false},
		{"a forced opening in a newer epoch is followed from any state", mir(P, 3, t1, true), store.Status{Epoch: 5, Forced: true}, t0, t0, forced(5), true},
		{"a forced opening in the mirror's own epoch is followed", mir(H, 3, time.Time{}, false), store.Status{Epoch: 3, Forced: true}, t0, t0, forced(3), true},
		{"a forced mirror ignores its own epoch's status", forced(3), store.Status{Epoch: 3, Forced: true}, t0, t1, forced(3), false},
		{"a mirror forced on its own keeps to it in its epoch", forced(2), store.Status{Epoch: 2}, t0, t0, forced(2), false},
		{"a mirror forced on its own ignores an opened status of its epoch", forced(3), store.Status{Epoch: 3, Open: time.Second}, t0, t0, forced(3), false},
		{"a reset lifts a forced mirror", forced(5), store.Status{Epoch: 6}, t0, t0, mir(C, 6, time.Time{}, false), true},
		{"a change: forced", mir(C, 2, time.Time{}, false), fleet.StatusOf(store.Change{Kind: store.Forced, Epoch: 3}), t0, t0, forced(3), true},
		{"a forced status does not end with time", mir(C, 2, time.Time{}, false), store.Status{Epoch: 3, Forced: true}, t0, t1.Add(time.Hour), forced(3), true},
		{"a change: opened in a newer epoch", mir(C, 0, time.Time{}, false), fleet.StatusOf(store.Change{Kind: store.Opened, Epoch: 1, Open: time.Minute}), t0, t0, mir(O, 1, t0.Add(time.Minute), false), true},
		{"a change: the late echo of this process's own opening", mir(H, 1, time.Time{}, false), fleet.StatusOf(store.Change{Kind: store.Opened, Epoch: 1, Open: time.Second}), t0, t1, mir(H, 1, time.Time{}, false), false},
		{"a change: closed", mir(P, 1, t1, false), fleet.StatusOf(store.Change{Kind: store.Closed, Epoch: 2}), t0, t0, mir(C, 2, time.Time{}, false), true},
		{"a change: released", mir(P, 1, t1, false), fleet.StatusOf(store.Change{Kind: store.Released, Epoch: 1}), t0, t0, mir(H, 1, time.Time{}, false), true},
		{"a change: another's lease given back: half-open its Lag later", lagged(P, 1, t1.Add(lag)), fleet.StatusOf(store.Change{Kind: store.Released, Epoch: 1}), t0, t0, lagged(P, 1, t0.Add(lag)), true},
		{"a change: another's lease given back, heard past the Lag: half-open", lagged(P, 1, t1.Add(lag)), fleet.StatusOf(store.Change{Kind: store.Released, Epoch: 1}), t0, t0.Add(lag + time.Millisecond), lagged(H, 1, time.Time{}), true},
		{"own epoch: another's lease over in the store, its end sooner than the Lag: kept", lagged(P, 3, t0.Add(10*time.Millisecond)), store.Status{Epoch: 3}, t0, t0, lagged(P, 3, t0.Add(10*time.Millisecond)), false},
	}
	for _, tt := range tests {
		got, changed := fleet.Follow(tt.m, tt.st, tt.at, tt.now)
		if got != tt.want || changed != tt.changed {
			t.Errorf("%s: Follow(%s, %+v, at %v, now %v) = %s, %v; want %s, %v", tt.name, show(tt.m), tt.st, tt.at.Sub(t0), tt.now.Sub(t0), show(got), changed, show(tt.want), tt.changed)
		}
	}
}

func show(m fleet.Mirror) string {
	until := "-"
	if !m.Until.IsZero() {
		until = "t0+" + m.Until.Sub(t0).String()
	}
	return fmt.Sprintf("{%v epoch %d until %s holder %v}", m.State, m.Epoch, until, m.Holder)
}
