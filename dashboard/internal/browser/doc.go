// Package browser holds the dashboard's tests in headless Chromium and the
// tool that takes the screenshot in the docs. It is a module of its own so
// that chromedp is a dependency of these tests only, never of a program
// that serves the dashboard.
package browser
