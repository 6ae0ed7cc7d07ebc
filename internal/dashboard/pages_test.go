package dashboard_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/internal/dashboard"
	"github.com/leasehold/leasehold/store"
)

// A pause of a name that is no queue is refused with 404 and makes no
// queue; a queue with messages or with a record alone is paused.
func TestPauseOfNoQueueIsRefused(t *testing.T) {
	f := setup(t)
	f.enqueue(store.NewMessage{Queue: "jobs", Payload: []byte("a")})
	if _, _, err := f.st.CreateQueue(f.ctx, "recorded", nil); err != nil {
		t.Fatal(err)
	}
	_, page := f.get("/")
	token := f.csrf(page)
	code, _, body := f.post("/queues/nothing/pause", url.Values{"csrf": {token}, "back": {"/"}})
	if code != 404 || !strings.Contains(body, "queue &#34;nothing&#34; does not exist") {
		t.Fatalf("pause of no queue = %d\n%s", code, body)
	}
	queues, err := f.st.Queues(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(queues, []string{"jobs", "recorded"}) {
		t.Fatalf("after a refused pause the store lists %v", queues)
	}
	for _, q := range []string{"jobs", "recorded"} {
		code, loc, _ := f.post("/queues/"+q+"/pause", url.Values{"csrf": {token}, "back": {"/"}})
		if st, _ := f.st.Stats(f.ctx, q); code != 303 || !st.Paused || !strings.Contains(loc, "done=paused+"+q) {
			t.Fatalf("pause of %s = %d %s, paused %v", q, code, loc, st.Paused)
		}
		// A paused queue stays one: pausing it again is no error.
		if code, _, _ := f.post("/queues/"+q+"/pause", url.Values{"csrf": {token}, "back": {"/"}}); code != 303 {
			t.Fatalf("pause of %s, paused, = %d", q, code)
		}
	}
}

// failingPages fails every page of queues with a detail that is the
// server's own.
type failingPages struct{ store.Store }

const secretDetail = "open /var/lib/leasehold/secret.db: permission denied"

func (failingPages) QueuePage(context.Context, string, string, int) ([]string, error) {
	return nil, errors.New(secretDetail)
}

// syncBuffer is a log's output, safe to read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var reference = regexp.MustCompile(`under reference ([0-9a-f]{16})`)

// A failure of the server's own reaches the client as a reference, the
// page and its JSON alike; the detail is in the log under it.
func TestServerErrorsKeepTheirDetailInTheLog(t *testing.T) {
	var log syncBuffer
	f := setup(t, func(c *dashboard.Config) {
		c.Store = failingPages{c.Store}
		c.Logger = slog.New(slog.NewTextHandler(&log, nil))
	})
	for _, path := range []string{"/api/queues", "/"} {
		code, body := f.get(path)
		m := reference.FindStringSubmatch(body)
		if code != 500 || strings.Contains(body, "secret.db") || m == nil {
			t.Fatalf("GET %s = %d, want 500 with a reference and no detail:\n%s", path, code, body)
		}
		if !strings.Contains(log.String(), "ref="+m[1]) || !strings.Contains(log.String(), "secret.db") {
			t.Fatalf("the log has no line of reference %s with the detail:\n%s", m[1], log.String())
		}
	}
}
