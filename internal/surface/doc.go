// Package surface counts the public surface of fusebox's core packages
// (manager, breaker, store, recover, classify) and holds it under a limit,
// so that a name only the module itself uses does not become an API by
// accident. The package has no code: only its test.
//
// A name is an exported identifier declared at package level (a constant,
// a variable, a type or a function) or an exported method of an exported
// type, in the files the go command builds for the running toolchain,
// tests left out. Struct fields and the methods of an interface are not
// counted: they are part of the type that declares them. So counted, the
// core exported 130 names after the cut the CHANGELOG records under
// Removed, and 146 before the next cut.
//
//	go test ./internal/surface -run TestSurface -v
//
// lists every name, package by package.
package surface
