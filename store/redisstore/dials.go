package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A go-redis client that cannot connect keeps dialling, with pauses, until
// the call's deadline: the call then fails with "context deadline
// exceeded", and why it could not connect ("connection refused", a DNS
// error) stays in the client's pool. A Store so notes its client's failed
// dials, through a hook that does nothing else, and names the last one in
// the error of a call whose deadline ran out while the client could not
// connect.

// dialFresh is how long a failed dial, with none succeeding since, counts
// as why a call ran out of time.
const dialFresh = 10 * time.Second

// dials notes the last dial of a client: whether it failed, how and when.
// It is a redis.Hook that changes nothing the client does.
type dials struct {
	mu   sync.Mutex
	err  error // the last dial's error; nil once a dial succeeded
	addr string
	at   time.Time
}

// watchDials adds d's hook to the client: to a Cluster client's node
// clients as it makes them, to any other go-redis client itself.
func watchDials(c redis.UniversalClient) *dials {
	d := &dials{}
	switch c := c.(type) {
	case *redis.ClusterClient:
		c.OnNewNode(func(node *redis.Client) { node.AddHook(d) })
	case *redis.Client:
		c.AddHook(d)
	case *redis.Ring:
		c.OnNewNode(func(shard *redis.Client) { shard.AddHook(d) })
	default:
		return nil
	}
	return d
}

// DialHook notes each dial's outcome. A connection dialled for a watch's
// reader (a PubSub reconnecting inside Receive) is closed once the watch
// ends: go-redis reads the reply of its HELLO without watching the
// context, holding the PubSub's lock, and the watch's close, which needs
// that lock, would wait for the reply as long as a partition lasts.
func (d *dials) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if conn != nil && ctx.Value(readerKey{}) != nil {
			context.AfterFunc(ctx, func() { _ = conn.Close() })
		}
		if ctx.Err() != nil && err != nil {
			return conn, err // the caller gave up: not the server's doing
		}
		d.mu.Lock()
		d.err, d.addr, d.at = err, addr, time.Now()
		d.mu.Unlock()
		return conn, err
	}
}

// ProcessHook leaves commands as they are.
func (d *dials) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook leaves pipelines as they are.
func (d *dials) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// explain returns err, the error of a store call, with the client's last
// failed dial added when err is a deadline or a cancellation and that dial
// is recent with none succeeding since: the error then reads "context
// deadline exceeded (the client cannot connect: dial tcp ...: connection
// refused)", and errors.Is finds both. Otherwise it returns err as it is.
func (d *dials) explain(err error, now time.Time) error {
	if d == nil || err == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return err
	}
	d.mu.Lock()
	dialErr, at := d.err, d.at
	d.mu.Unlock()
	if dialErr == nil || now.Sub(at) > dialFresh || errors.Is(err, dialErr) {
		return err
	}
	return fmt.Errorf("%w (the client cannot connect: %w)", err, dialErr)
}
