package grpcbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/grpcbreaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// down is a health service that answers every check with Unavailable.
type down struct {
	healthpb.UnimplementedHealthServer
}

func (down) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return nil, status.Error(codes.Unavailable, "down for maintenance")
}

// startDown serves down on a loopback port; stop stops it.
func startDown() (addr string, stop func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, down{})
	go s.Serve(lis)
	return lis.Addr().String(), s.Stop
}

// A server that answers Unavailable trips its breaker; later calls are
// declined with Unavailable too, without reaching it.
func Example() {
	addr, stop := startDown()
	defer stop()

	m := manager.Start(manager.Options{})
	defer m.Stop()
	i, err := grpcbreaker.New(m, grpcbreaker.Options{
		Config: func(target string) manager.Config {
			return manager.Config{
				Strategy: breaker.Consecutive{Failures: 3},
				Recover:  recover.BasicTimeout{Open: time.Minute},
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	conn, err := grpc.NewClient(addr, append(i.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	for n := 1; n <= 5; n++ {
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if errors.Is(err, breaker.ErrOpen) {
			fmt.Printf("call %d: %s, declined by the breaker\n", n, status.Code(err))
			continue
		}
		fmt.Printf("call %d: %s\n", n, status.Code(err))
	}
	// Output:
	// call 1: Unavailable
	// call 2: Unavailable
	// call 3: Unavailable
	// call 4: Unavailable, declined by the breaker
	// call 5: Unavailable, declined by the breaker
}

// A classifier that also counts NotFound as a failure, for a service where
// NotFound means a missing deployment rather than a missing record.
func ExampleClassify() {
	notFoundFails := func(err error) classify.Outcome {
		if status.Code(err) == codes.NotFound {
			return classify.Failure
		}
		return grpcbreaker.Classify(err)
	}
	fmt.Println(notFoundFails(status.Error(codes.NotFound, "")))
	fmt.Println(notFoundFails(status.Error(codes.InvalidArgument, "")))
	fmt.Println(notFoundFails(status.Error(codes.Canceled, "")))
	// Output:
	// failure
	// success
	// ignore
}

// MethodKey gives each method of a target its own breaker.
func ExampleMethodKey() {
	fmt.Println(grpcbreaker.MethodKey("dns:///api.example.com:443", "/grpc.health.v1.Health/Check"))
	// Output: dns:///api.example.com:443/grpc.health.v1.Health/Check
}

// RetryDelay reads how long a server asked its clients to wait.
func ExampleRetryDelay() {
	st, _ := status.New(codes.Unavailable, "overloaded").WithDetails(retryAfter(30 * time.Second))
	d, ok := grpcbreaker.RetryDelay(st.Err(), nil)
	fmt.Println(d, ok)
	// Output: 30s true
}
