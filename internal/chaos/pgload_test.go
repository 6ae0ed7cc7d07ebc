package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/internal/testproc"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
)

// The load of the PostgreSQL deployment tests.
const (
	loadWorkers   = 2
	loadConsumers = 2
	// Every enqueue and every send is a batch of loadBatch messages: the
	// enqueuer's every 50 ms, the sender's every 200 ms.
	loadBatch        = 5
	loadEnqueueEvery = 50 * time.Millisecond
	loadSendEvery    = 200 * time.Millisecond
	// loadCallTimeout bounds one enqueue or send; one that fails is not
	// acknowledged, though it may have gone through.
	loadCallTimeout = 10 * time.Second
)

// ack is one acknowledged enqueue or send.
type ack struct {
	at time.Time
	id string
}

// pgLoad runs, against one PostgreSQL deployment reached by one DSN, the
// whole of leasehold as users run it: worker processes (this binary's
// "worker" children) on queue, fed by an enqueuer in the test through a
// store of its own, and a "leasehold serve" process whose SQS queue a
// sender in the test feeds through the AWS SDK and consumer processes
// drain. It keeps the acknowledged enqueues and sends, and, for those
// that failed, their payloads: a failed call may have gone through.
type pgLoad struct {
	t         *testing.T
	st        *postgres.Store
	srv       *sqsServer
	client    *sqs.Client
	queueURL  string
	handled   string // the workers' handler log
	workers   []*testproc.Child
	consumers []*sqsChild

	stop chan struct{}
	wg   sync.WaitGroup

	mu            sync.Mutex
	enqueued      map[int64]string // acknowledged: message id → payload
	enqueueAcks   []ack
	enqueueUnsure map[string]bool   // payloads of failed enqueues
	sent          map[string]string // acknowledged: SQS message id → body
	sendAcks      []ack
	sendUnsure    map[string]bool // bodies of failed sends
	enqueueErrs   int
	sendErrs      int
}

// startLoad starts the servers, workers and consumers, and the enqueuer
// and sender, all on dsn, whose database is migrated.
func startLoad(t *testing.T, bin, dsn string) *pgLoad {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	l := &pgLoad{t: t, st: st, handled: filepath.Join(t.TempDir(), "handled.log"), stop: make(chan struct{}),
		enqueued: map[int64]string{}, enqueueUnsure: map[string]bool{}, sent: map[string]string{}, sendUnsure: map[string]bool{}}

	l.srv = startServer(t, bin, dsn)
	l.client = newSQSClient(l.srv.endpoint)
	l.queueURL = createSQSQueue(t, l.client)

	for range loadWorkers {
		w := start(t, "worker", childDB+"="+dsn, childLog+"="+l.handled)
		w.Expect(t, "ready")
		l.workers = append(l.workers, w)
	}
	dir := t.TempDir()
	for i := range loadConsumers {
		l.consumers = append(l.consumers, startConsumer(t, filepath.Join(dir, fmt.Sprintf("consumer-%02d.log", i)),
			l.srv.endpoint, l.queueURL, rand.Uint64(), sqsConsumerOutages+"=1"))
	}
	l.wg.Go(l.enqueue)
	l.wg.Go(l.send)
	t.Cleanup(l.stopProducers)
	return l
}

// every calls f every period until the load stops.
func (l *pgLoad) every(period time.Duration, f func(round int)) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for round := 0; ; round++ {
		select {
		case <-l.stop:
			return
		case <-tick.C:
			f(round)
		}
	}
}

func (l *pgLoad) enqueue() {
	l.every(loadEnqueueEvery, func(round int) {
		msgs := make([]store.NewMessage, loadBatch)
		for i := range msgs {
			msgs[i] = store.NewMessage{Queue: queue, Payload: fmt.Appendf(nil, "e-%05d-%d", round, i), MaxDeliveries: 100}
		}
		ctx, cancel := context.WithTimeout(context.Background(), loadCallTimeout)
		res, err := l.st.Enqueue(ctx, msgs)
		cancel()
		now := time.Now()
		l.mu.Lock()
		defer l.mu.Unlock()
		if err != nil {
			l.enqueueErrs++
			for _, m := range msgs {
				l.enqueueUnsure[string(m.Payload)] = true
			}
			return
		}
		for i, r := range res {
			l.enqueued[r.ID] = string(msgs[i].Payload)
			l.enqueueAcks = append(l.enqueueAcks, ack{at: now, id: strconv.FormatInt(r.ID, 10)})
		}
	})
}

func (l *pgLoad) send() {
	l.every(loadSendEvery, func(round int) {
		entries := make([]types.SendMessageBatchRequestEntry, loadBatch)
		for i := range entries {
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String("m" + strconv.Itoa(i)),
				MessageBody: aws.String(fmt.Sprintf("s-%05d-%d", round, i))}
		}
		ctx, cancel := context.WithTimeout(context.Background(), loadCallTimeout)
		out, err := l.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(l.queueURL), Entries: entries})
		cancel()
		now := time.Now()
		l.mu.Lock()
		defer l.mu.Unlock()
		if err != nil {
			l.sendErrs++
			for _, e := range entries {
				l.sendUnsure[*e.MessageBody] = true
			}
			return
		}
		for _, ok := range out.Successful {
			i, _ := strconv.Atoi((*ok.Id)[1:])
			l.sent[*ok.MessageId] = *entries[i].MessageBody
			l.sendAcks = append(l.sendAcks, ack{at: now, id: *ok.MessageId})
		}
		if len(out.Failed) > 0 {
			l.sendErrs++
		}
		for _, f := range out.Failed {
			i, _ := strconv.Atoi((*f.Id)[1:])
			l.sendUnsure[*entries[i].MessageBody] = true
		}
	})
}

// stopProducers stops the enqueuer and the sender and waits for them.
func (l *pgLoad) stopProducers() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// firstAcked returns the ids of the first enqueue and the first send
// acknowledged after since, if there are both yet.
func (l *pgLoad) firstAcked(since time.Time) (enqueued int64, sent string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := func(acks []ack) (string, bool) {
		for _, a := range acks {
			if a.at.After(since) {
				return a.id, true
			}
		}
		return "", false
	}
	e, ok1 := first(l.enqueueAcks)
	s, ok2 := first(l.sendAcks)
	if !ok1 || !ok2 {
		return 0, "", false
	}
	id, _ := strconv.ParseInt(e, 10, 64)
	return id, s, true
}

// checkAlive fails the test if a worker, a consumer or the server has
// exited: they all carry on through what the test does to the database.
func (l *pgLoad) checkAlive() {
	l.t.Helper()
	for _, w := range l.workers {
		select {
		case <-w.Done():
			l.t.Fatalf("a worker process exited: %v", w.Wait(l.t))
		default:
		}
	}
	for _, c := range l.consumers {
		select {
		case <-c.proc.Done():
			l.t.Fatalf("consumer %s exited: %v", filepath.Base(c.log), c.proc.Wait(l.t))
		default:
		}
	}
	select {
	case <-l.srv.exited:
		l.t.Fatalf("leasehold serve exited: %v\n%s", l.srv.err, l.srv.output.String())
	default:
	}
}

// waitFor polls cond (with the processes checked alive) until it holds,
// failing the test after within.
func (l *pgLoad) waitFor(what string, within time.Duration, cond func() (bool, error)) time.Duration {
	l.t.Helper()
	began := time.Now()
	var err error
	for {
		l.checkAlive()
		var ok bool
		if ok, err = cond(); ok {
			return time.Since(began)
		}
		if time.Since(began) > within {
			l.t.Fatalf("%s: not within %s (last error: %v)", what, within, err)
		}
		time.Sleep(100 * time.Millisecond) // polling real processes, bounded by within
	}
}

// listeners counts the connections that LISTEN on the server the load's
// store reaches.
func (l *pgLoad) listeners() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	err := l.st.Pool().QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND datname = current_database()").Scan(&n)
	return n, err
}

// completed returns how many messages each queue has completed.
func (l *pgLoad) completed() (work, sqs int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w, err1 := l.st.Stats(ctx, queue)
	s, err2 := l.st.Stats(ctx, sqsQueue)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("stats: %v, %v", err1, err2)
	}
	return w.Completed, s.Completed, nil
}

// waitCompleted waits until the workers' queue has completed at least
// work messages and the SQS queue sqs.
func (l *pgLoad) waitCompleted(work, sqs int64, within time.Duration) {
	l.t.Helper()
	l.waitFor(fmt.Sprintf("%d messages of the workers and %d of serve completed", work, sqs), within, func() (bool, error) {
		w, s, err := l.completed()
		return w >= work && s >= sqs, err
	})
}

// finish stops the producers, waits until both queues are drained, stops
// the processes gracefully, and checks the outcome: every acknowledged
// enqueue and send completed, nothing else but what a failed call may
// have added, each under the lease of the one completion that succeeded.
func (l *pgLoad) finish(within time.Duration) {
	t := l.t
	t.Helper()
	ctx := context.Background()
	l.stopProducers()
	l.waitFor("both queues drained", within, func() (bool, error) {
		for _, q := range []string{queue, sqsQueue} {
			s, err := l.st.Stats(ctx, q)
			if err != nil || s.Pending+s.Waiting+s.Processing+s.Dead != 0 {
				return false, err
			}
		}
		return true, nil
	})
	for _, w := range l.workers {
		_ = w.Cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range l.consumers {
		_ = c.proc.Cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, w := range l.workers {
		if err := w.Wait(t); err != nil {
			t.Fatalf("worker after SIGTERM: %v, want exit status 0", err)
		}
	}
	for _, c := range l.consumers {
		if err := c.proc.Wait(t); err != nil {
			t.Fatalf("consumer %s after SIGTERM: %v, want exit status 0", filepath.Base(c.log), err)
		}
	}
	l.srv.stop(t)

	// The workers' queue.
	done := listAll(t, l.st, queue, store.Completed)
	byID := map[int64]store.Info{}
	for _, in := range done {
		byID[in.ID] = in
		if p, ok := l.enqueued[in.ID]; ok && p != string(in.Payload) {
			t.Fatalf("message %d completed with payload %q, but was enqueued with %q", in.ID, in.Payload, p)
		}
		if _, ok := l.enqueued[in.ID]; !ok && !l.enqueueUnsure[string(in.Payload)] {
			t.Fatalf("message %d (%q) completed, but was never enqueued", in.ID, in.Payload)
		}
	}
	for id, p := range l.enqueued {
		if _, ok := byID[id]; !ok {
			t.Fatalf("message %d (%q) was acknowledged by Enqueue but is not completed", id, p)
		}
	}
	checkHandlerTokens(t, done, l.handled)

	// The SQS queue: a failed send that went through counts as sent.
	bodies := map[string]bool{}
	for _, b := range l.sent {
		bodies[b] = true
	}
	ids, err := serve.MessageIDs(context.Background(), l.st)
	if err != nil {
		t.Fatalf("the database's SQS message ids: %v", err)
	}
	sent := map[string]string{}
	for _, in := range listAll(t, l.st, sqsQueue, store.Completed) {
		id, body := ids.MessageID(in.ID), string(in.Payload)
		if _, acked := l.sent[id]; !acked && l.sendUnsure[body] && !bodies[body] {
			sent[id] = body
		}
	}
	unsureSent := len(sent)
	for id, b := range l.sent {
		sent[id] = b
	}
	logs := readSQSLogs(t, l.consumers, sent, ids)
	checkSQSOutcome(t, l.st, sent, &logs)
	if logs.refusedCount == 0 {
		t.Fatal("no delete was refused under a lost lease: the run never exercised fencing")
	}
	t.Logf("workers: %d enqueues acknowledged, %d completed (%d enqueue calls failed); "+
		"serve: %d sends acknowledged, %d completed (%d went through without an acknowledgement; %d send calls failed), "+
		"%d deletes succeeded, %d refused under a lost lease, %d whose outcome the server could not tell",
		len(l.enqueued), len(done), l.enqueueErrs, len(l.sent), len(sent), unsureSent, l.sendErrs,
		logs.deleted, logs.refusedCount, logs.unknown)
}
