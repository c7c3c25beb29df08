package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
)

// The chart's palette: one hue per library, a lighter shade for its second
// path.
var libColor = map[string]string{
	"fusebox":             "#1b9e77",
	"gobreaker":           "#d95f02",
	"gobreaker-twostep":   "#f4a261",
	"failsafe":            "#6a51a3",
	"failsafe-standalone": "#b4a7d6",
}

var fallbackColors = []string{"#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"}

// chart draws the median ns/op of every library in every side-by-side
// case as grouped horizontal bars on a log scale, with the value at the end
// of each bar.
func chart(r *results) []byte {
	const (
		width    = 980
		left     = 250 // case labels
		right    = 80  // values past the longest bar
		barH     = 11
		barGap   = 2
		groupPad = 10
		top      = 78
	)
	plotW := float64(width - left - right)
	groups := r.groups()
	libs := r.libs()
	colors := make(map[string]string)
	for i, lib := range libs {
		c, ok := libColor[lib]
		if !ok {
			c = fallbackColors[i%len(fallbackColors)]
		}
		colors[lib] = c
	}

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, g := range groups {
		for _, lib := range g.libs {
			if s, ok := r.stat(g.name+"/lib="+lib, "ns/op"); ok && s.median > 0 {
				lo, hi = math.Min(lo, s.median), math.Max(hi, s.median)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	dLo, dHi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dHi <= dLo {
		dHi = dLo + 1
	}
	x := func(v float64) float64 {
		return left + (math.Log10(v)-dLo)/(dHi-dLo)*plotW
	}

	height := top
	for _, g := range groups {
		height += len(g.libs)*(barH+barGap) + 2*groupPad
	}
	bottom := height
	height += 40

	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	p(`<text x="%d" y="22" font-size="15" font-weight="bold">ns/op per case and library (median, log scale; shorter is faster)</text>`+"\n", 10)

	// Legend.
	lx := 10.0
	for _, lib := range libs {
		p(`<rect x="%.0f" y="36" width="12" height="12" fill="%s"/>`, lx, colors[lib])
		p(`<text x="%.0f" y="46">%s</text>`+"\n", lx+16, html.EscapeString(lib))
		lx += 16 + 7.5*float64(len(lib)) + 22
	}

	// Alternate bands behind the groups, so a bar is easy to tie to its case.
	y := float64(top)
	for i, g := range groups {
		h := float64(len(g.libs)*(barH+barGap) + 2*groupPad)
		if i%2 == 0 {
			p(`<rect x="0" y="%.0f" width="%d" height="%.0f" fill="#f3f3f3"/>`+"\n", y, width, h)
		}
		y += h
	}

	// Decade grid with labels above and below.
	for d := dLo; d <= dHi; d++ {
		gx := x(math.Pow(10, d))
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#bbbbbb"/>`+"\n", gx, top-6, gx, bottom)
		label := html.EscapeString(decade(d))
		p(`<text x="%.1f" y="%d" text-anchor="middle" fill="#444">%s</text>`+"\n", gx, top-10, label)
		p(`<text x="%.1f" y="%d" text-anchor="middle" fill="#444">%s</text>`+"\n", gx, bottom+16, label)
		for _, k := range []float64{2, 5} {
			if v := k * math.Pow(10, d); d < dHi {
				mx := x(v)
				p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e0e0e0" stroke-dasharray="2,3"/>`+"\n", mx, top, mx, bottom)
			}
		}
	}

	// Bars.
	y = float64(top)
	for _, g := range groups {
		h := float64(len(g.libs)*(barH+barGap) + 2*groupPad)
		p(`<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n",
			left-8, y+h/2, html.EscapeString(caseTitle(g.name)))
		by := y + groupPad
		for _, lib := range g.libs {
			s, ok := r.stat(g.name+"/lib="+lib, "ns/op")
			if ok && s.median > 0 {
				w := x(s.median) - left
				p(`<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="%s"><title>%s, %s: %s ns/op</title></rect>`,
					left, by, math.Max(w, 1), barH, colors[lib],
					html.EscapeString(caseTitle(g.name)), html.EscapeString(lib), ns(s.median))
				p(`<text x="%.1f" y="%.1f" font-size="10" dominant-baseline="middle">%s ns</text>`+"\n",
					left+math.Max(w, 1)+4, by+barH/2.0, ns(s.median))
			}
			by += barH + barGap
		}
		y += h
	}
	p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444444"/>`+"\n", left, top-6, left, bottom)
	p("</svg>\n")
	return b.Bytes()
}

// decade names 10^d nanoseconds: 1 ns, 10 ns, 100 ns, 1 µs and so on.
func decade(d float64) string {
	units := []string{"ns", "µs", "ms", "s"}
	i := int(d) / 3
	if d < 0 || i >= len(units) {
		return fmt.Sprintf("1e%.0f ns", d)
	}
	return fmt.Sprintf("%.0f %s", math.Pow(10, float64(int(d)%3)), units[i])
}
