package redisstore

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// reloadEvery is the least time between two reloads of a Cluster's layout
// that a Store asks of its client. After a master fails, a go-redis
// ClusterClient keeps sending the commands of its slots to the dead
// master until it reloads the layout, which by itself it does only every
// 60 seconds; the cluster promotes a replica within a few seconds
// (cluster-node-timeout and an election). So a store call that fails in a
// way that says a node cannot be reached makes the Store ask the client to
// reload (redis.ClusterClient.ReloadState), at most once per reloadEvery:
// a manager follows the store again within about reloadEvery of the
// promotion, and a fleet of failing calls costs the cluster at most one
// CLUSTER SLOTS per Store and reloadEvery.
const reloadEvery = 250 * time.Millisecond

// reloader asks for a reload of a Cluster's layout after failures that
// may mean the layout changed, at most once per reloadEvery. It is safe
// for concurrent use and runs no goroutine of its own (the client reloads
// on one of its own, which ends with the reload). A nil *reloader, for a
// client that is not a Cluster client, does nothing.
type reloader struct {
	reload func()
	last   atomic.Int64 // when the last reload was asked for, in Unix nanoseconds; 0: never
}

func newReloader(c redis.UniversalClient) *reloader {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return nil
	}
	return &reloader{reload: func() { cc.ReloadState(context.Background()) }}
}

// after asks for a reload if err says a node cannot be reached and no
// reload was asked for within reloadEvery before now. It reports whether
// it asked.
func (r *reloader) after(err error, now time.Time) bool {
	if r == nil || !unreachable(err) {
		return false
	}
	t := now.UnixNano()
	last := r.last.Load()
	if last != 0 && t-last < int64(reloadEvery) {
		return false
	}
	// Of concurrent failures, only the one whose swap wins asks.
	if !r.last.CompareAndSwap(last, t) {
		return false
	}
	r.reload()
	return true
}

// unreachable reports whether err, from a command to a Cluster, says that
// a node cannot be reached or no longer serves what the client thinks it
// serves: a connection refused, reset or closed (EOF), a timeout or a
// deadline, or one of the replies a cluster gives while its layout
// changes (CLUSTERDOWN, READONLY from a master turned replica, TRYAGAIN,
// MASTERDOWN, MOVED, a shard channel dropped by its node). A deadline counts: a node gone without a word (a
// host down, a partition) answers nothing until the caller's deadline. A
// cancelled call, or any other reply of Redis, says nothing of the
// layout.
func unreachable(err error) bool {
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, errSlotMoved):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, context.DeadlineExceeded):
		return true
	case redis.IsClusterDownError(err), redis.IsReadOnlyError(err), redis.IsTryAgainError(err), redis.IsMasterDownError(err):
		return true
	}
	if _, moved := redis.IsMovedError(err); moved {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}
