// Package outside holds the tests that see fusebox as a program outside
// this repository does, which the other tests cannot: inside the workspace
// (go.work) every module is its own folder, whatever its go.mod says.
//
// TestRelease runs scripts/release.sh in a copy of the repository.
// TestConsumer releases such a copy at a version of its own, serves its
// modules from a module proxy folder as the module proxy would, and builds
// a module of its own against them with the workspace off: each nested
// module must resolve the core, and the others it uses, from its own
// go.mod. TestGuidesInstall checks what the guides say each module needs
// (its go get line, its Go) against its go.mod. The package has no code:
// only its tests.
package outside
