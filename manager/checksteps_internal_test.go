package manager

// Every test of the package checks the invariants of every shared step.
func init() { checkSteps = true }
