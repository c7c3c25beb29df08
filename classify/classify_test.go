package classify_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/classify"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDefault(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want classify.Outcome
	}{
		{"nil", nil, classify.Success},
		{"context.Canceled", context.Canceled, classify.Ignore},
		{"wrapped context.Canceled", fmt.Errorf("get /orders: %w", context.Canceled), classify.Ignore},
		{"twice wrapped context.Canceled", fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", context.Canceled)), classify.Ignore},
		{"joined with context.Canceled", errors.Join(io.EOF, context.Canceled), classify.Ignore},
		{"cause of a cancelled context", canceledCtxErr(), classify.Ignore},
		{"context.DeadlineExceeded", context.DeadlineExceeded, classify.Failure},
		{"wrapped context.DeadlineExceeded", fmt.Errorf("get /orders: %w", context.DeadlineExceeded), classify.Failure},
		{"io.EOF", io.EOF, classify.Failure},
		{"plain error", errors.New("connection refused"), classify.Failure},
		{"error text mentioning cancel", errors.New("context canceled"), classify.Failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, classify.Default(tt.err), "Default(%v)", tt.err)
		})
	}
}

// canceledCtxErr returns the error of a context that was cancelled, as a
// caller that gave up would see it.
func canceledCtxErr() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx.Err()
}

func TestOutcomeString(t *testing.T) {
	tests := []struct {
		o    classify.Outcome
		want string
	}{
		{classify.Success, "success"},
		{classify.Failure, "failure"},
		{classify.Ignore, "ignore"},
		{0, "none"},
		{4, "outcome(4)"},
		{255, "outcome(255)"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.o.String(), "Outcome(%d).String()", uint8(tt.o))
	}
}

var (
	errBadRequest = errors.New("bad request")
	errNotFound   = errors.New("not found")
	errTeapot     = errors.New("teapot")
)

func TestIgnoreErrors(t *testing.T) {
	// next marks what it saw, so that a test can tell whether IgnoreErrors
	// decided by itself or handed the error on.
	var seen []error
	next := func(err error) classify.Outcome {
		seen = append(seen, err)
		if errors.Is(err, errTeapot) {
			return classify.Success
		}
		return classify.Default(err)
	}

	tests := []struct {
		name     string
		next     classify.Classifier
		errs     []error
		err      error
		want     classify.Outcome
		wantNext bool // the error reached next
	}{
		{"listed error", next, []error{errBadRequest, errNotFound}, errBadRequest, classify.Ignore, false},
		{"second listed error", next, []error{errBadRequest, errNotFound}, errNotFound, classify.Ignore, false},
		{"wrapped listed error", next, []error{errBadRequest}, fmt.Errorf("post /orders: %w", errBadRequest), classify.Ignore, false},
		{"other error goes to next", next, []error{errBadRequest}, errTeapot, classify.Success, true},
		{"nil goes to next", next, []error{errBadRequest}, nil, classify.Success, true},
		{"no errors listed", next, nil, errBadRequest, classify.Failure, true},
		{"nil in the list matches nothing", next, []error{nil}, errBadRequest, classify.Failure, true},
		{"nil next: Default for others", nil, []error{errBadRequest}, io.EOF, classify.Failure, false},
		{"nil next: Default for nil", nil, []error{errBadRequest}, nil, classify.Success, false},
		{"nil next: Default for Canceled", nil, []error{errBadRequest}, context.Canceled, classify.Ignore, false},
		{"nil next: listed error", nil, []error{errBadRequest}, errBadRequest, classify.Ignore, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen = nil
			c := classify.IgnoreErrors(tt.next, tt.errs...)
			assert.Equal(t, tt.want, c(tt.err), "IgnoreErrors(%v)(%v)", tt.errs, tt.err)
			if tt.wantNext {
				assert.Equal(t, []error{tt.err}, seen, "next should see %v", tt.err)
			} else {
				assert.Empty(t, seen, "next should not be called for %v", tt.err)
			}
		})
	}
}

func TestIgnoreErrorsCopiesTheList(t *testing.T) {
	errs := []error{errBadRequest}
	c := classify.IgnoreErrors(nil, errs...)
	errs[0] = errNotFound // the caller reuses its slice
	assert.Equal(t, classify.Ignore, c(errBadRequest), "the classifier must keep the errors it was given")
	assert.Equal(t, classify.Failure, c(errNotFound), "a later change to the caller's slice must not leak in")
}

// customIs is an error that matches errBadRequest through an Is method, as
// errors from some client libraries do.
type customIs struct{}

func (customIs) Error() string        { return "status 400" }
func (customIs) Is(target error) bool { return target == errBadRequest }

func TestIgnoreErrorsUsesErrorsIs(t *testing.T) {
	c := classify.IgnoreErrors(nil, errBadRequest)
	assert.Equal(t, classify.Ignore, c(customIs{}), "an error whose Is method matches is ignored")
}
