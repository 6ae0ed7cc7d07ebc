package leasehold_test

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
)

// The raw handler gets the jobs of kinds without a handler of their own,
// with their bytes as stored and their facts, and answers a request with
// the reply it sets; a kind with a handler keeps it.
func TestHandleAny(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newClient(t, leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {}}})
		typed := make(chan string, 1)
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
			typed <- job.Args.To
			return nil
		})
		raw := make(chan leasehold.RawJob, 1)
		c.HandleAny(func(ctx context.Context, job *leasehold.RawJob) error {
			job.SetReply(append([]byte("done: "), job.Payload...))
			raw <- *job
			return nil
		})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := c.Stop(ctx); err != nil {
				t.Error(err)
			}
		}()
		res, err := st.Enqueue(ctx, []store.NewMessage{{Queue: "default", Kind: "resize", Key: "img-1", Payload: []byte("cat.png"),
			ReplyTo: "replies", Priority: 3}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Enqueue(ctx, sendEmail{To: "ann"}, nil); err != nil {
			t.Fatal(err)
		}
		if to := <-typed; to != "ann" {
			t.Fatalf("the typed handler got %q", to)
		}
		job := <-raw
		if job.ID != res[0].ID || job.Kind != "resize" || job.Queue != "default" || job.Key != "img-1" || string(job.Payload) != "cat.png" ||
			job.Attempt != 1 || job.MaxDeliveries != store.DefaultMaxDeliveries || job.Priority != 3 || job.FencingToken <= 0 ||
			job.EnqueuedAt.IsZero() || job.ReplyTo != "replies" {
			t.Fatalf("raw job %+v", job)
		}
		waitFor(t, "the reply", func() bool { return count(t, st, "replies").Pending == 1 })
		infos, err := st.List(ctx, store.ListFilter{Queue: "replies", State: store.Pending, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		var reply struct {
			RequestID int64  `json:"request_id"`
			Output    []byte `json:"output"`
		}
		if err := json.Unmarshal(infos[0].Payload, &reply); err != nil || reply.RequestID != job.ID || string(reply.Output) != "done: cat.png" {
			t.Fatalf("reply %s: %+v, %v", infos[0].Payload, reply, err)
		}
		defer func() {
			if recover() == nil {
				t.Error("HandleAny after Start did not panic")
			}
		}()
		c.HandleAny(func(context.Context, *leasehold.RawJob) error { return nil })
	})
}

// hangingClaims is a store whose claims hang until hang is closed.
type hangingClaims struct {
	store.Store
	hang chan struct{}
}

func (h *hangingClaims) Claim(ctx context.Context, c store.Claim) ([]store.Delivery, error) {
	<-h.hang
	return h.Store.Claim(ctx, c)
}

// A claim loop that stops going round is reported to OnStall once it has
// been silent for 12 minutes, at the next look, once a minute.
func TestOnStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem, err := memory.New(memory.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Close()
		st := &hangingClaims{Store: mem, hang: make(chan struct{})}
		stalled := make(chan []string, 1)
		began := time.Now()
		c, err := leasehold.NewClient(store.WithoutTx(st), leasehold.Config{Logger: quiet(), Queues: map[string]leasehold.QueueConfig{"default": {}},
			OnStall: func(queues []string) {
				select {
				case stalled <- queues:
				default:
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if got := <-stalled; len(got) != 1 || got[0] != "default" {
			t.Fatalf("stalled queues %q, want default", got)
		}
		if took := time.Since(began); took != 13*time.Minute {
			t.Fatalf("the stall was reported after %s, want 13 min: the first look after 12 min of silence", took)
		}
		close(st.hang)
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
