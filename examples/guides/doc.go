// Package guides holds, as tests, the code shown in README.md and in the
// guides under docs/, so that every snippet there compiles and does what the
// text around it says. TestSnippets checks that each Go block of those files
// appears, line for line, in these tests or in the source they quote.
package guides
