package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// machine describes where the benchmarks ran.
type machine struct {
	cpu    string
	cores  int
	goVer  string
	os     string
	memory string
	commit string
}

// describe gathers what the report says of the machine. Each item falls
// back to "unknown" rather than failing the report.
func describe(mainDir string, res *results) machine {
	m := machine{
		cpu:    res.cpu,
		cores:  runtime.NumCPU(),
		goVer:  output("go", "env", "GOVERSION"),
		os:     osName(),
		memory: meminfo(),
		commit: output("git", "-C", mainDir, "describe", "--always", "--dirty", "--abbrev=12"),
	}
	if m.cpu == "" {
		m.cpu = cpuinfo("model name")
	}
	return m
}

// output runs a command and returns its trimmed standard output, or
// "unknown".
func output(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if s := strings.TrimSpace(string(out)); err == nil && s != "" {
		return s
	}
	return "unknown"
}

func osName() string {
	name := runtime.GOOS + "/" + runtime.GOARCH
	if pretty := keyValue("/etc/os-release", "PRETTY_NAME", "="); pretty != "" {
		name = strings.Trim(pretty, `"`) + ", " + name
	}
	if rel, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		name += ", kernel " + strings.TrimSpace(string(rel))
	}
	return name
}

func cpuinfo(key string) string {
	if v := keyValue("/proc/cpuinfo", key, ":"); v != "" {
		return v
	}
	return "unknown"
}

func meminfo() string {
	var kb float64
	if _, err := fmt.Sscanf(keyValue("/proc/meminfo", "MemTotal", ":"), "%f kB", &kb); err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%.1f GiB", kb/(1<<20))
}

// loadAverage returns the 1, 5 and 15 minute load averages, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// keyValue returns the value of the first line of path that reads key,
// sep, value; or "".
func keyValue(path, key, sep string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), sep)
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
