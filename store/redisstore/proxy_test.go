package redisstore_test

import (
	"net"
	"sync"
	"testing"
	"time"
)

// faultProxy is a loopback TCP proxy in front of a redis-server, one per
// manager, that plays a network's faults on that manager's link: a black
// hole (nothing passes either way, the bytes wait as TCP would retransmit
// them, and pass once it heals), a reset of every connection (an RST, as a
// middlebox that drops its state sends), and latency (every byte waits
// that long before it is passed on).
type faultProxy struct {
	l    net.Listener
	to   string
	done chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	conns   map[*proxied]struct{}
	holed   bool
	healed  chan struct{} // closed when the black hole ends
	delay   time.Duration
	accepts int
}

// proxied is one client connection and its connection to the server.
type proxied struct {
	in, out net.Conn
	once    sync.Once
}

func (c *proxied) close(reset bool) {
	c.once.Do(func() {
		if reset {
			for _, conn := range []net.Conn{c.in, c.out} {
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // an RST, not a FIN
				}
			}
		}
		c.in.Close()
		c.out.Close()
	})
}

// startFaultProxy starts a proxy to the server at to; the test's cleanup
// closes it and waits for its goroutines.
func startFaultProxy(tb testing.TB, to string) *faultProxy {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("proxy: %v", err)
	}
	p := &faultProxy{l: l, to: to, done: make(chan struct{}), conns: map[*proxied]struct{}{}, healed: make(chan struct{})}
	close(p.healed)
	p.wg.Add(1)
	go p.serve()
	tb.Cleanup(p.close)
	return p
}

func (p *faultProxy) addr() string { return p.l.Addr().String() }

// close ends the proxy and every connection through it.
func (p *faultProxy) close() {
	select {
	case <-p.done:
		return
	default:
	}
	close(p.done)
	p.l.Close()
	p.reset()
	p.wg.Wait()
}

func (p *faultProxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.connect(in)
	}
}

// connect dials the server for in, once the link is not black-holed (a
// connection attempt during a partition waits, as a SYN unanswered).
func (p *faultProxy) connect(in net.Conn) {
	defer p.wg.Done()
	if !p.wait() {
		in.Close()
		return
	}
	out, err := net.DialTimeout("tcp", p.to, time.Second)
	if err != nil {
		in.Close()
		return
	}
	c := &proxied{in: in, out: out}
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		c.close(true)
		return
	default:
	}
	p.conns[c] = struct{}{}
	p.accepts++
	p.mu.Unlock()
	p.wg.Add(2)
	go p.pipe(c, out, in)
	go p.pipe(c, in, out)
}

// wait waits while the link is black-holed; false once the proxy closed.
func (p *faultProxy) wait() bool {
	p.mu.Lock()
	healed := p.healed
	p.mu.Unlock()
	select {
	case <-healed:
		return true
	case <-p.done:
		return false
	}
}

type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst: a reader queues what it reads with the time it
// was read, and the writer passes each chunk on once the link's latency
// has passed since and the link is not black-holed.
func (p *faultProxy) pipe(c *proxied, dst, src net.Conn) {
	defer p.wg.Done()
	q := make(chan chunk, 64)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case q <- chunk{b: buf[:n], at: time.Now()}:
				case <-p.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		c.close(false)
		for range q { // the reader ends once src is closed
		}
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	for ch := range q {
		if !p.wait() {
			return
		}
		p.mu.Lock()
		d := p.delay
		p.mu.Unlock()
		if wait := time.Until(ch.at.Add(d)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-p.done:
				return
			}
		}
		if !p.wait() {
			return
		}
		if _, err := dst.Write(ch.b); err != nil {
			return
		}
	}
}

// blackhole stops every byte on the link, both ways, and every new
// connection, until heal.
func (p *faultProxy) blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.holed {
		p.holed = true
		p.healed = make(chan struct{})
	}
}

// heal ends a black hole: what waited passes.
func (p *faultProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holed {
		p.holed = false
		close(p.healed)
	}
}

// setDelay gives the link a latency of d (zero: none).
func (p *faultProxy) setDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// reset ends every connection on the link with an RST.
func (p *faultProxy) reset() {
	p.mu.Lock()
	conns := make([]*proxied, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close(true)
	}
}
