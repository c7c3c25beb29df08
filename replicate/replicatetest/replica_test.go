package replicatetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/replicate"
	"github.com/fusebox-go/fusebox/replicate/replicatetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var _ replicate.Replica = (*replicatetest.Replica)(nil)

func TestReplicaModes(t *testing.T) {
	ctx := context.Background()
	r := replicatetest.NewReplica()

	require.NoError(t, r.Put(ctx, "a", []byte("1")))
	require.NoError(t, r.Delete(ctx, "absent"), "deleting an absent key succeeds")

	boom := errors.New("boom")
	r.Fail(boom)
	assert.ErrorIs(t, r.Put(ctx, "b", []byte("2")), boom, "a failing replica returns the error given to Fail")
	r.Fail(nil)
	assert.ErrorIs(t, r.Delete(ctx, "a"), replicatetest.ErrDown, "Fail(nil) means ErrDown")

	r.Hang()
	tctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, r.Put(tctx, "c", []byte("3")), context.DeadlineExceeded, "a hung call ends with its context")

	r.Heal()
	assert.Equal(t, map[string]string{"a": "1"}, r.Snapshot(), "failed and timed-out calls applied nothing")
	assert.Equal(t, 5, r.Calls(), "every call is counted, whatever became of it")
}

func TestReplicaHealReleasesHungCalls(t *testing.T) {
	r := replicatetest.NewReplica()
	r.Hang()
	errc := make(chan error, 1)
	go func() { errc <- r.Put(context.Background(), "k", []byte("v")) }()
	waitFor(t, func() bool { return r.Hung() == 1 }, "the call hangs")
	r.Heal()
	require.NoError(t, <-errc, "a healed replica applies the hung call")
	v, ok := r.Get("k")
	assert.True(t, ok)
	assert.Equal(t, "v", string(v))
	assert.Equal(t, 0, r.Hung())
}

func TestReplicaFailReleasesHungCalls(t *testing.T) {
	r := replicatetest.NewReplica()
	r.Hang()
	errc := make(chan error, 1)
	go func() { errc <- r.Delete(context.Background(), "k") }()
	waitFor(t, func() bool { return r.Hung() == 1 }, "the call hangs")
	r.Fail(nil)
	assert.ErrorIs(t, <-errc, replicatetest.ErrDown)
	assert.Empty(t, r.History("k"))
}

func TestReplicaHistory(t *testing.T) {
	ctx := context.Background()
	r := replicatetest.NewReplica()
	buf := []byte("1")
	require.NoError(t, r.Put(ctx, "k", buf))
	buf[0] = 'X'
	require.NoError(t, r.Delete(ctx, "k"))
	require.NoError(t, r.Put(ctx, "k", []byte("2")))
	assert.Equal(t, []replicatetest.Change{
		{Value: []byte("1")},
		{Deleted: true},
		{Value: []byte("2")},
	}, r.History("k"), "the history keeps copies, in order")
	assert.Equal(t, []string{"k"}, r.Keys())
}

func TestPrimaryMemory(t *testing.T) {
	replicatetest.TestPrimary(t, func(*testing.T) replicate.Primary { return replicate.NewMemory() })
}

// waitFor polls cond, with a deadline, for a state another goroutine
// reaches.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
