// Package outside holds the tests that use fusebox the way a program outside
// this repository does, which the tests of the workspace (go.work) cannot
// see: inside it, every module is its own folder, whatever its go.mod says.
//
// TestConsumer serves the modules of the repository from a module proxy
// directory, as they will be published at the version their go.mod files
// require of one another, and builds a module of its own against them with
// the workspace off: each nested module must resolve the core, and the
// others it uses, from its own go.mod. TestRelease runs scripts/release.sh
// in a copy of the repository. The package has no code: only its tests.
package outside
