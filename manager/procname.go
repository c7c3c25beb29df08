package manager

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf8"
)

// maxProcessName is the longest Options.Name, in bytes.
const maxProcessName = 128

// numbers holds the numbers of this process's live managers that took
// the default name: the first is "web-7", a second live one "web-7-2",
// and a manager started after one stopped takes the number it freed.
var numbers struct {
	sync.Mutex
	live []bool // live[i]: number i+1 is taken
}

// defaultProcessName is Options.Name's zero value: the host name
// ("web-7"), and, while another manager of the process holds it, the
// lowest number no live manager of the process holds ("web-7-2"), so that
// two managers of one process count as two processes of a quorum, as two
// processes would. A replica restarted (a crash loop, a container
// restarted in its pod) keeps its name, so that a quorum counts it as
// the one replica it is. It returns the number taken, which free gives
// back once the manager has stopped.
func defaultProcessName() (string, int) {
	host, err := os.Hostname()
	if err != nil || host == "" || checkProcessName(host) != nil {
		host = "fusebox"
	}
	numbers.Lock()
	defer numbers.Unlock()
	n := slices.Index(numbers.live, false)
	if n < 0 {
		n = len(numbers.live)
		numbers.live = append(numbers.live, false)
	}
	numbers.live[n] = true
	name := clip(host, maxProcessName-24)
	if n > 0 {
		name += "-" + strconv.Itoa(n+1)
	}
	return name, n + 1
}

// freeNumber gives back the number of a default name (defaultProcessName);
// 0 is no number.
func freeNumber(n int) {
	if n <= 0 {
		return
	}
	numbers.Lock()
	numbers.live[n-1] = false
	numbers.Unlock()
}

// checkProcessName reports why name cannot be Options.Name, or nil. The
// name is shown by log lines, the dashboard and the fusebox command line,
// and stored with a shared breaker's opening, its probe lease and its
// quorum's reports: it must be short and print as itself on one line.
func checkProcessName(name string) error {
	switch {
	case len(name) > maxProcessName:
		return fmt.Errorf("fusebox: Options.Name %q...: %d bytes long, more than %d", clip(name, 32), len(name), maxProcessName)
	case !utf8.ValidString(name):
		return fmt.Errorf("fusebox: Options.Name %q: not valid UTF-8", name)
	}
	for i, r := range name {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("fusebox: Options.Name %q: holds %U at byte %d; a process name is printable characters without spaces", name, r, i)
		}
	}
	return nil
}

// Name returns the name of the manager's process in a fleet
// (Options.Name, or its default).
func (m *Manager) Name() string { return m.name }
