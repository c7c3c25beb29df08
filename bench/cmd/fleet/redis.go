package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is a redis-server process the parent started on a loopback port,
// without persistence, and the parent's own connection to it, which only
// reads INFO.
type server struct {
	cmd    *exec.Cmd
	addr   string
	dir    string
	admin  *redis.Client
	exited chan struct{}
}

// startServer starts redis-server from PATH on a free loopback port and
// returns once it answers PING.
func startServer(ctx context.Context) (*server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server not found on PATH (Debian: apt-get install -y redis-server)")
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fusebox-fleet-redis-")
	if err != nil {
		return nil, err
	}
	s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, exited: make(chan struct{})}
	s.cmd = exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	var log strings.Builder
	var logMu sync.Mutex
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s.cmd.Stderr = s.cmd.Stdout
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			logMu.Lock()
			if log.Len() < 4096 {
				log.WriteString(sc.Text() + "\n")
			}
			logMu.Unlock()
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	s.admin = redis.NewClient(&redis.Options{Addr: s.addr, ContextTimeoutEnabled: true})
	deadline := time.Now().Add(10 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := s.admin.Ping(pctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			logMu.Lock()
			defer logMu.Unlock()
			s.stop()
			return nil, fmt.Errorf("redis-server exited at start:\n%s", log.String())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.stop()
			return nil, fmt.Errorf("redis-server on %s did not answer within 10s: %v", s.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the server and removes its directory. Calling it again does
// nothing more.
func (s *server) stop() {
	if s.admin != nil {
		s.admin.Close()
		s.admin = nil
	}
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		<-s.exited
		s.cmd = nil
	}
	os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// info is one reading of INFO: its fields, and the calls of each command
// from commandstats.
type info struct {
	at     time.Time
	fields map[string]string
	calls  map[string]int64 // command name (cmdstat_ stripped) -> calls
}

// readInfo asks for INFO sections in one command.
func (s *server) info(ctx context.Context, sections ...string) (info, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	text, err := s.admin.Info(ctx, sections...).Result()
	if err != nil {
		return info{}, fmt.Errorf("INFO %s: %w", strings.Join(sections, " "), err)
	}
	return parseInfo(text, time.Now()), nil
}

// sample reads what a measured window needs: stats, cpu, memory, clients,
// keyspace and commandstats.
func (s *server) sample(ctx context.Context) (info, error) {
	return s.info(ctx, "stats", "cpu", "memory", "clients", "keyspace", "commandstats")
}

// parseInfo reads the text of INFO: "key:value" lines, with commandstats'
// "cmdstat_NAME:calls=N,usec=..." lines gathered by command.
func parseInfo(text string, at time.Time) info {
	inf := info{at: at, fields: map[string]string{}, calls: map[string]int64{}}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		name, isCmd := strings.CutPrefix(key, "cmdstat_")
		if !isCmd {
			inf.fields[key] = val
			continue
		}
		for _, f := range strings.Split(val, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				inf.calls[name] = n
			}
		}
	}
	return inf
}

// float reads a numeric field, 0 if absent.
func (inf info) float(key string) float64 {
	v, _ := strconv.ParseFloat(inf.fields[key], 64)
	return v
}

// keys is the number of keys in db0, from the keyspace section
// ("db0:keys=N,expires=M,avg_ttl=T").
func (inf info) keys() int64 {
	for _, f := range strings.Split(inf.fields["db0"], ",") {
		if v, ok := strings.CutPrefix(f, "keys="); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// dataMemory is used_memory less what the clients' buffers take
// (mem_clients_normal): what the keys and the server's own structures
// take, which is what a breaker's state adds to.
func (inf info) dataMemory() float64 {
	return inf.float("used_memory") - inf.float("mem_clients_normal") - inf.float("used_memory_scripts")
}

// commands is the calls of every command but INFO, which only the parent
// sends to read these figures.
func (inf info) commands() int64 {
	var n int64
	for name, c := range inf.calls {
		if name != "info" {
			n += c
		}
	}
	return n
}

// cpu is the server's CPU seconds so far, system and user.
func (inf info) cpu() float64 { return inf.float("used_cpu_sys") + inf.float("used_cpu_user") }
