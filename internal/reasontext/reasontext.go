// Package reasontext holds the one rule by which fusebox keeps the text
// of why a breaker opened (store.Reason.Why, Stats.Cause): on one line
// and bounded, whoever wrote it.
package reasontext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Max is the longest text a store keeps of why a breaker opened, in
// bytes.
const Max = 200

// Line returns s on one line, every control character (a newline, a tab,
// an invalid byte) a space, cut to at most limit bytes at a character
// boundary, with "..." at the end of a cut text.
func Line(s string, limit int) string {
	if len(s) <= limit && !strings.ContainsFunc(s, control) {
		return s
	}
	s = strings.Map(func(r rune) rune {
		if control(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) <= limit {
		return s
	}
	dots := "..."
	if limit < len(dots) {
		dots = ""
	}
	n := limit - len(dots)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:max(n, 0)] + dots
}

// control reports whether r is a control character, or stands for an
// invalid byte.
func control(r rune) bool { return r == utf8.RuneError || unicode.IsControl(r) }
