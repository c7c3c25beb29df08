package manager

import (
	"errors"
	"fmt"
	"reflect"
	"unicode"
	"unicode/utf8"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/store"
)

// maxNameLen is the longest breaker name Register accepts, in bytes.
const maxNameLen = 256

// errInvalidName is the cause of the error Register returns for a name it
// refuses: empty, longer than 256 bytes, not valid UTF-8, or holding a
// character that is not printable.
//
// A breaker's name goes into every declined call's error, into log lines,
// metric labels and store keys, so it must be short and print as itself:
// every character must be a letter, mark, number, punctuation, symbol or the
// ASCII space (unicode.IsPrint). Control characters (newlines, NUL), format
// characters (zero-width joiners, bidirectional overrides) and separators
// other than the ASCII space are refused.
var errInvalidName = errors.New("fusebox: invalid breaker name")

// checkName reports why name cannot be a breaker's name, or nil.
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("fusebox: register: the breaker's name must not be empty: %w", errInvalidName)
	case len(name) > maxNameLen:
		// Quote only the start: the point is that the whole is too long
		// to print.
		return fmt.Errorf("fusebox: register breaker %q...: the name is %d bytes long, more than %d: %w",
			clip(name, 32), len(name), maxNameLen, errInvalidName)
	case !utf8.ValidString(name):
		return fmt.Errorf("fusebox: register breaker %q: the name is not valid UTF-8: %w", name, errInvalidName)
	}
	for i, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("fusebox: register breaker %q: the name holds %U, which is not printable, at byte %d: %w",
				name, r, i, errInvalidName)
		}
	}
	return nil
}

// clip returns at most the first n bytes of s, cut at a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// validateConfig checks a breaker's name and Config, and returns the Config
// with its defaults filled in. It is the one check of a Config: Register and
// Breaker.Reconfigure both use it, so the same Config is accepted or refused
// with the same error by either (op, opRegister or opReconfigure, is the
// verb of the message). Its errors name the breaker and the field.
//
// A Strategy is checked by making a Counter with it, under a guard: a
// Strategy whose NewCounter panics (a nil pointer in an interface, say) is
// an error here, not a panic later on the manager's goroutine. The Recover
// is checked by its Init, which the manager runs.
func validateConfig(op, name string, cfg Config) (Config, error) {
	if err := checkName(name); err != nil {
		return cfg, err
	}
	if cfg.Strategy == nil {
		cfg.Strategy = defaultStrategy
	}
	if cfg.Recover == nil {
		cfg.Recover = defaultRecover
	}
	if cfg.Classify == nil {
		cfg.Classify = classify.Default
	}
	if err := checkStrategy(cfg.Strategy); err != nil {
		return cfg, configError(op, name, "Strategy", err)
	}
	if cfg.Quorum < 0 {
		return cfg, configError(op, name, "Quorum", fmt.Errorf("must not be negative, got %d", cfg.Quorum))
	}
	if cfg.SlowCall < 0 {
		return cfg, configError(op, name, "SlowCall", fmt.Errorf("must not be negative, got %v", cfg.SlowCall))
	}
	if cfg.SlowStart < 0 {
		return cfg, configError(op, name, "SlowStart", fmt.Errorf("must not be negative, got %v", cfg.SlowStart))
	}
	if isNilPointer(cfg.Recover) {
		return cfg, configError(op, name, "Recover", fmt.Errorf("a nil %T", cfg.Recover))
	}
	if cfg.Store != nil {
		if isNilPointer(cfg.Store) {
			return cfg, configError(op, name, "Store", fmt.Errorf("a nil %T", cfg.Store))
		}
		if cfg.Fallback > store.FailClosed {
			return cfg, configError(op, name, "Fallback", fmt.Errorf("unknown value %d", cfg.Fallback))
		}
	}
	return cfg, nil
}

// checkStrategy makes a Counter with s, turning a panic into an error.
func checkStrategy(s breaker.Strategy) error {
	if isNilPointer(s) {
		return fmt.Errorf("a nil %T", s)
	}
	var c breaker.Counter
	var err error
	if p := guard(func() { c, err = s.NewCounter() }); p != nil {
		return fmt.Errorf("%T.NewCounter panicked: %v", s, p.value)
	}
	if err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("%T.NewCounter returned a nil Counter", s)
	}
	return nil
}

// isNilPointer reports whether v, an interface value, holds a nil pointer:
// a method with a value receiver called on it panics.
func isNilPointer(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}

// Operations named by configError.
const (
	opRegister    = "register"
	opReconfigure = "reconfigure"
	opGroup       = "group"
)

// configError says which breaker and which part of its Config is wrong, for
// operation op. field is the Config field; err usually names the field
// inside it.
func configError(op, name, field string, err error) error {
	if op == opGroup {
		return fmt.Errorf("fusebox: group %q: Config.%s: %w", name, field, err)
	}
	return fmt.Errorf("fusebox: %s breaker %q: Config.%s: %w", op, name, field, err)
}

// registerError is configError for Register.
func registerError(name, field string, err error) error {
	return configError(opRegister, name, field, err)
}
