package classify_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/fusebox-go/fusebox/classify"
)

func ExampleDefault() {
	fmt.Println(classify.Default(nil))
	fmt.Println(classify.Default(fmt.Errorf("get /orders: %w", context.Canceled)))
	fmt.Println(classify.Default(context.DeadlineExceeded))
	fmt.Println(classify.Default(errors.New("connection refused")))
	// Output:
	// success
	// ignore
	// failure
	// failure
}

func ExampleIgnoreErrors() {
	// A request the caller got wrong says nothing about the service's
	// health, so it must never trip the breaker.
	errInvalid := errors.New("invalid order")
	c := classify.IgnoreErrors(classify.Default, errInvalid)

	fmt.Println(c(fmt.Errorf("post /orders: %w", errInvalid)))
	fmt.Println(c(errors.New("503 service unavailable")))
	fmt.Println(c(nil))
	// Output:
	// ignore
	// failure
	// success
}

func ExampleOutcome_String() {
	for _, o := range []classify.Outcome{classify.Success, classify.Failure, classify.Ignore, 0} {
		fmt.Println(o)
	}
	// Output:
	// success
	// failure
	// ignore
	// none
}
