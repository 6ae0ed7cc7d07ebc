package lifecycle_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/leasehold/leasehold/lifecycle"
)

func TestFuncStopsOnShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stopped := errors.New("stopped")
		l := lifecycle.Func(func(ctx context.Context) error {
			<-ctx.Done()
			return stopped
		})
		ran := make(chan error, 1)
		go func() { ran <- l.Run(context.Background()) }()
		synctest.Wait()
		if !l.Running() {
			t.Fatal("not running after Run began")
		}
		if err := l.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if err := <-ran; !errors.Is(err, stopped) {
			t.Fatalf("Run returned %v, want the function's result", err)
		}
		if l.Running() {
			t.Fatal("running after Run returned")
		}
		if err := l.Run(context.Background()); err == nil {
			t.Fatal("a second Run was accepted")
		}
	})
}

func TestFuncShutdownBeforeRun(t *testing.T) {
	called := false
	l := lifecycle.Func(func(context.Context) error { called = true; return nil })
	if err := l.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Run(context.Background()); err != nil || called {
		t.Fatalf("Run after Shutdown: %v, called %v; want nil and nothing run", err, called)
	}
}
