package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunWritesTable runs one small round and checks that the table has a
// row for every measure and a fusebox ratio in each.
func TestRunWritesTable(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-n", "100", "-rounds", "1", "-calls", "1000", "-removes", "5"}, &out); err != nil {
		t.Fatal(err)
	}
	for m := measure(0); m < measures; m++ {
		if !strings.Contains(out.String(), "| "+measureNames[m]+" |") {
			t.Errorf("no row %q in\n%s", measureNames[m], out.String())
		}
	}
	if !strings.Contains(out.String(), "fusebox / gobreaker") {
		t.Errorf("no ratio column in\n%s", out.String())
	}
}
