package grpcbreaker

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/fusebox-go/fusebox/classify"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Classify is the classification gRPC clients usually want, and the
// Interceptor's default. It goes by the status code of err
// (status.Code(err)):
//
//   - nil (codes.OK) is a Success;
//   - codes.Canceled is Ignore: the caller gave up, which says nothing
//     about the server;
//   - codes.Unavailable, DeadlineExceeded, ResourceExhausted, Internal,
//     Unknown and DataLoss are Failures: the server is down, overloaded,
//     too slow or broken. Transport errors (a refused connection, a reset
//     stream) reach the client as Unavailable, and an error that carries no
//     status at all counts as Unknown;
//   - InvalidArgument, NotFound, AlreadyExists, PermissionDenied,
//     Unauthenticated, FailedPrecondition, OutOfRange, Aborted and
//     Unimplemented are Successes: the server answered, and the call was
//     the caller's mistake or lost a race, which is no reason to stop
//     calling the server;
//   - any other code, which the gRPC specification does not define, is a
//     Failure.
//
// Classify can be used inside a custom classifier that treats some codes
// differently, and as a classify.Classifier on any breaker.
func Classify(err error) classify.Outcome {
	if err == nil {
		return classify.Success
	}
	switch status.Code(err) {
	case codes.OK:
		return classify.Success
	case codes.Canceled:
		return classify.Ignore
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.Unauthenticated, codes.FailedPrecondition,
		codes.OutOfRange, codes.Aborted, codes.Unimplemented:
		return classify.Success
	}
	return classify.Failure
}

// PushbackKey is the trailer by which a server tells a client how many
// milliseconds to wait before it tries again (gRPC's retry design, A6).
const PushbackKey = "grpc-retry-pushback-ms"

// RetryDelay returns how long the server that returned err asked the client
// to wait before calling again, and whether it asked at all: the RetryInfo
// detail of err's status (google.rpc.RetryInfo), or else the
// grpc-retry-pushback-ms value of the call's trailer (nil if unknown). A
// pushback that is negative or not a number is the server asking not to be
// retried at all, which RetryDelay reports as the longest wait; the
// Interceptor caps it with Options.MaxRetryDelay. A nil err reports false.
func RetryDelay(err error, trailer metadata.MD) (time.Duration, bool) {
	if err == nil {
		return 0, false
	}
	var h *hintError
	if errors.As(err, &h) {
		return h.wait, true
	}
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
				if wait := ri.GetRetryDelay().AsDuration(); wait > 0 {
					return wait, true
				}
			}
		}
	}
	return pushback(trailer)
}

// pushback reads the grpc-retry-pushback-ms trailer.
func pushback(trailer metadata.MD) (time.Duration, bool) {
	v := trailer.Get(PushbackKey)
	if len(v) == 0 {
		return 0, false
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(v[0]), 10, 64)
	switch {
	case err != nil || ms < 0:
		return math.MaxInt64, true // "do not retry"
	case ms == 0:
		return 0, false
	case ms > math.MaxInt64/int64(time.Millisecond):
		return math.MaxInt64, true
	}
	return time.Duration(ms) * time.Millisecond, true
}

// hintError is a call's error together with the wait its server asked
// for: what the Interceptor releases the call with, so that the breaker's
// recovery policy finds the hint in recover.Context.Err. It keeps err's
// status and unwraps to err, so classifiers see the call's error.
type hintError struct {
	err  error
	wait time.Duration
}

func (h *hintError) Error() string              { return h.err.Error() }
func (h *hintError) Unwrap() error              { return h.err }
func (h *hintError) RetryAfter() time.Duration  { return h.wait }
func (h *hintError) GRPCStatus() *status.Status { return status.Convert(h.err) }
