// Package headless starts Chromium without a window, for the dashboard's
// browser tests and for the screenshot in the documentation, so that both
// see the page the same way.
package headless

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// ErrNoChromium is returned by Find when no Chromium is installed.
var ErrNoChromium = errors.New("no Chromium found in PATH (chromium, chromium-browser); on Debian or Ubuntu: apt-get install -y chromium")

// Names are the executables Find looks for, in order.
var Names = []string{"chromium", "chromium-browser"}

// Find returns the path of the first of Names found in PATH, or
// ErrNoChromium.
func Find() (string, error) {
	for _, name := range Names {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// Options say how to start the browser.
type Options struct {
	// ExecPath is the browser's executable, as returned by Find.
	ExecPath string
	// UserDataDir is the profile directory; give a fresh, empty one.
	UserDataDir string
	// Width and Height are the window's size in pixels; zero means 1280
	// by 800.
	Width, Height int
}

// Browser is a running headless Chromium with one tab.
type Browser struct {
	// Ctx is the tab's context, for chromedp.Run.
	Ctx    context.Context
	cancel []context.CancelFunc

	mu      sync.Mutex
	dialogs []string
	errs    []string
}

// Start starts the browser with flags that suit a machine without network
// access or a display, and opens a blank tab. Every JavaScript dialog
// (alert, confirm, prompt) the page opens is recorded and dismissed, and
// so is every uncaught exception and every error the browser logs (a
// failed request, a blocked script). Close the browser with Close.
func Start(parent context.Context, opts Options) (*Browser, error) {
	if opts.ExecPath == "" {
		return nil, errors.New("headless.Start: Options.ExecPath is empty")
	}
	if opts.UserDataDir == "" {
		return nil, errors.New("headless.Start: Options.UserDataDir is empty")
	}
	if opts.Width == 0 || opts.Height == 0 {
		opts.Width, opts.Height = 1280, 800
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(parent,
		chromedp.ExecPath(opts.ExecPath),
		chromedp.UserDataDir(opts.UserDataDir),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// The machine may have no network: keep the browser from
		// reaching out (background requests fail and log errors).
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.WindowSize(opts.Width, opts.Height),
	)
	b := &Browser{}
	tabCtx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithListener(b.listen))
	b.Ctx = tabCtx
	b.cancel = []context.CancelFunc{cancelTab, cancelAlloc}
	// The first call starts the browser.
	if _, err := chromedp.Call(tabCtx, log.Enable, cdp.Empty{}); err != nil {
		b.Close()
		return nil, fmt.Errorf("headless.Start: starting %s: %w", opts.ExecPath, err)
	}
	return b, nil
}

// listen runs on the tab's reading goroutine: it must not run commands.
func (b *Browser) listen(ev any) {
	switch e := ev.(type) {
	case *page.EventJavascriptDialogOpening:
		b.mu.Lock()
		b.dialogs = append(b.dialogs, string(e.Type)+": "+e.Message)
		b.mu.Unlock()
		// A dialog blocks the page until it is answered.
		go func() {
			_, _ = chromedp.Call(b.Ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}()
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg += " " + d.Exception.Description
		}
		b.addError(fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, msg))
	case *log.EventEntryAdded:
		if e.Entry.Level == log.EntryLevelError {
			b.addError(fmt.Sprintf("%s %s: %s", e.Entry.Source, e.Entry.URL, e.Entry.Text))
		}
	}
}

func (b *Browser) addError(s string) {
	b.mu.Lock()
	b.errs = append(b.errs, s)
	b.mu.Unlock()
}

// Errors returns the uncaught exceptions and the errors logged by the
// browser since it started.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errs...)
}

// Dialogs returns the JavaScript dialogs the page opened, as "type: message".
func (b *Browser) Dialogs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dialogs...)
}

// Close closes the tab and stops the browser, waiting for its process to
// end. Calling it more than once does nothing more.
func (b *Browser) Close() {
	for _, c := range b.cancel {
		c()
	}
}
