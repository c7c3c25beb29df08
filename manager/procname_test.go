package manager_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/manager"
)

const envPrintName = "FUSEBOX_TEST_PRINT_NAME"

// TestDefaultNameSurvivesARestart runs two lives of one replica as two OS
// processes, one after the other, each with the default Options.Name: a
// quorum counts a crash loop as the one replica it is only if each life
// has the name of the last.
func TestDefaultNameSurvivesARestart(t *testing.T) {
	if os.Getenv(envPrintName) != "" {
		m := manager.Start(manager.Options{})
		os.Stdout.WriteString("name=" + m.Name() + "\n")
		m.Stop()
		return
	}
	var names []string
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDefaultNameSurvivesARestart$", "-test.count=1")
		cmd.Env = append(os.Environ(), envPrintName+"=1")
		out, err := cmd.Output()
		require.NoError(t, err, "%s", out)
		_, name, ok := strings.Cut(string(out), "name=")
		require.True(t, ok, "the child printed no name: %s", out)
		name, _, _ = strings.Cut(name, "\n")
		names = append(names, name)
	}
	host, err := os.Hostname()
	require.NoError(t, err)
	assert.Equal(t, names[0], names[1], "the two lives' default names")
	assert.Equal(t, host, names[0], "a replica's default name is its host's (a pod's)")
}
