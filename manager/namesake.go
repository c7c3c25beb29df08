package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"
)

// An announcer is a store that keeps which life of a process announced
// itself last under a name (redisstore.Store's Announce). A manager
// announces itself through it every announceEvery resyncs, and so finds
// another live
// process of its name: two processes of one name are one reporter to a
// quorum and one opener to their fleet, which no store can tell apart.
type announcer interface {
	Announce(ctx context.Context, name, life string, ttl time.Duration) (prev string, err error)
}

// newLife returns what tells this manager's life from every other under
// its name: which process and host it runs in, since when, and a random
// part. A log line shows it.
func newLife() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("pid %d on %q since %s #%s", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339), hex.EncodeToString(b[:]))
}

// announceEvery is how many resyncs a manager announces itself once: the
// first, and every fifth after it, so that an idle manager pays two
// commands every five resyncs for it.
const announceEvery = 5

// announceTTL is how long a store keeps a manager's announcement: four
// of its announcements, so that a late one does not hide a namesake, and
// at least twenty seconds.
func announceTTL(resync time.Duration) time.Duration {
	return max(4*announceEvery*resync, 20*time.Second)
}

// A namesake is what a hub's announcements said of the manager's name on
// its store: whether it announced itself yet, and the other life it heard
// last under its name, and when.
type namesake struct {
	announced bool
	other     string
	at        time.Time
}

// heard is the rule by which a manager finds another live process of its
// name: the store answered an announcement of life at now with prev, the
// life that announced itself last under the name before. The first
// answer tells nothing (prev may be the life this replica had before a
// restart); after it, a prev other than its own life is a process that
// announced itself since, under the same name: a namesake, which report
// says to log when it is another than the last one heard, or heard again
// after the store forgot it (ttl).
func (n namesake) heard(life, prev string, now time.Time, ttl time.Duration) (_ namesake, report bool) {
	if !n.announced {
		return namesake{announced: true}, false
	}
	if prev == "" || prev == life {
		return n, false
	}
	report = prev != n.other || now.Sub(n.at) > ttl
	return namesake{announced: true, other: prev, at: now}, report
}

// announce announces the manager through hub h's store, if it can and
// the store answers, in a store call of its own beside the resync's read
// (which it neither delays nor judges: a failed announcement says
// nothing, and is not retried before the next).
func (m *Manager) announce(h *hub) {
	a, ok := h.st.(announcer)
	if !ok || h.link.Down {
		return
	}
	ttl := announceTTL(m.stores.resync)
	m.goStore(h, nil, func(ctx context.Context, _ time.Time) storeResult {
		prev, err := a.Announce(ctx, m.name, m.life, ttl)
		return announcedMsg{h: h, prev: prev, ok: err == nil}
	})
}

// announcedMsg is a store's answer to an announcement of the manager
// (announce): the life announced under its name before, if ok.
type announcedMsg struct {
	h    *hub
	prev string
	ok   bool
}

func (msg announcedMsg) handle(m *Manager) {
	if msg.ok {
		m.heardNamesake(msg.h, msg.prev)
	}
}

// heardNamesake applies the answer to an announcement of the manager on
// hub h's store, and logs a namesake the first time it is heard.
func (m *Manager) heardNamesake(h *hub, prev string) {
	var report bool
	h.namesake, report = h.namesake.heard(m.life, prev, m.clk.Now(), announceTTL(m.stores.resync))
	if report {
		m.logWarn("fusebox: another live process has this process's name: a quorum counts the two as one process, and both take themselves for the opener of what either opens; set Options.Name to a name of each process's own",
			"field", "Name", "name", m.name, "this", m.life, "other", prev, "breakers", len(h.list), "names", h.breakerNames())
	}
}
