package store_test

import (
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/store"
	"github.com/fusebox-go/fusebox/store/storetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryConformance(t *testing.T) {
	var mock *clock.Mock
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) store.Store {
			mock = clock.NewMock()
			return store.NewMemory(mock)
		},
		Advance: func(t *testing.T, d time.Duration) { mock.Add(d) },
		Clock:   func() clock.Clock { return mock },
	})
}
