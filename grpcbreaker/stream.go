package grpcbreaker

import (
	"context"
	"io"
	"sync/atomic"

	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// stream is a grpc.ClientStream whose permit is released once, when the
// stream ends.
type stream struct {
	grpc.ClientStream
	ctx           context.Context
	i             *Interceptor
	e             *entry
	p             manager.Permit
	serverStreams bool
	ended         atomic.Bool
	stop          func() bool // stops the context's AfterFunc
}

func (s *stream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	switch {
	case err == io.EOF:
		s.end(nil, false)
	case err != nil:
		s.end(err, true)
	case !s.serverStreams:
		// The one response of a unary-response stream: grpc has read the
		// status already, and it was OK.
		s.end(nil, false)
	}
	return err
}

func (s *stream) SendMsg(m any) error {
	err := s.ClientStream.SendMsg(m)
	if err != nil && err != io.EOF {
		// io.EOF means the stream ended and RecvMsg has its status; any
		// other error ended it here.
		s.end(err, false)
	}
	return err
}

// end releases the stream's permit with the error it ended with, unless it
// was released already. trailer says whether the stream's trailer can be
// read now.
func (s *stream) end(err error, trailer bool) {
	if !s.ended.CompareAndSwap(false, true) {
		return
	}
	s.stop()
	var md metadata.MD
	if err != nil && trailer && s.i.hints {
		md = s.ClientStream.Trailer()
	}
	s.i.release(s.e, s.p, err, md)
}

// abandon releases the permit of a stream whose context is done before its
// caller saw it end. It runs on a goroutine of its own, where a panicking
// classifier has no caller to reach: the stream then counts as a failure.
func (s *stream) abandon() {
	if !s.ended.CompareAndSwap(false, true) {
		return
	}
	err := status.FromContextError(s.ctx.Err()).Err()
	cause := s.i.cause(err, nil)
	o := classify.Failure
	if !guard(func() { o = s.e.classify(cause) }) {
		o = classify.Failure
	}
	s.p.ReleaseWith(o, cause)
}
