package guides_test

import (
	"testing"

	"go.uber.org/goleak"
)

// docs/testing.md: check for leaked goroutines.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
