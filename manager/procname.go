package manager

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// maxProcessName is the longest Options.Name, in bytes.
const maxProcessName = 128

// started counts the managers made in this process, so that the default
// name of each is its own.
var started atomic.Int64

// defaultProcessName is Options.Name's zero value: the host name and the
// process id ("web-7-1234"), and, for every manager of the process after
// the first, its number ("web-7-1234-2"), so that two managers of one
// process count as two processes of a quorum, as two processes would.
func defaultProcessName() string {
	host, err := os.Hostname()
	if err != nil || host == "" || checkProcessName(host) != nil {
		host = "fusebox"
	}
	name := clip(host, maxProcessName-24) + "-" + strconv.Itoa(os.Getpid())
	if n := started.Add(1); n > 1 {
		name += "-" + strconv.FormatInt(n, 10)
	}
	return name
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
