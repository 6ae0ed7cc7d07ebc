package sqsapi

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/store"
)

// This file holds message move tasks: StartMessageMoveTask,
// ListMessageMoveTasks and CancelMessageMoveTask, and the runner that
// moves a task's messages.
//
// A task is kept in its source queue's record (under taskPrefix, one
// attribute each), so that it survives restarts and every server of the
// database sees it. Its runner moves one batch per store.Move call, each
// batch one transaction, then writes the task's progress: a server that
// stops between the two loses no message and moves none twice (a moved
// message has left the source), and the count of moved messages falls
// short by that batch at most. A cancel is an attribute of its own, which
// only CancelMessageMoveTask writes, so that the runner's progress never
// overwrites it.
//
// Who runs a task: the server that started it, which writes its progress
// at least once a second. A running task whose progress is older than
// staleTask is taken over by any server that looks at it: each server
// looks at every running task once when it starts (RunMoveTasks reads the
// record of every queue, a page of names at a time, once), and the three
// actions look at the tasks of their source. A server that finds a task
// another runs keeps an eye on it, reading its record every staleTask/2,
// until it ends or goes stale. Should two servers run one task at once (a
// takeover racing a slow owner), no message moves twice, as Move moves
// each message once; only the rate and the count suffer.

const (
	taskPrefix   = internalPrefix + "task:"
	cancelPrefix = internalPrefix + "cancel:"
	// maxTasksKept is how many tasks of a source ListMessageMoveTasks can
	// show: the most recent, as SQS keeps them.
	maxTasksKept = 10
	// maxMoveRate bounds MaxNumberOfMessagesPerSecond, as SQS does.
	maxMoveRate = 500
	// moveBatch is the batch of a task without a rate; such a task moves
	// batch after batch without waiting.
	moveBatch = 100
	// staleTask is how old a running task's progress may grow before
	// another server takes it over.
	staleTask = 30 * time.Second
	// moveRetry is how long a runner waits after a store error.
	moveRetry = time.Second
)

// The statuses of a task, SQS's.
const (
	taskRunning    = "RUNNING"
	taskCompleted  = "COMPLETED"
	taskCancelling = "CANCELLING"
	taskCancelled  = "CANCELLED"
	taskFailed     = "FAILED"
)

// moveTask is a message move task as its source's record keeps it.
type moveTask struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// Destination is the queue the messages go to; empty: each back to
	// the queue it was dead-lettered from.
	Destination string `json:"destination,omitempty"`
	// Rate is MaxNumberOfMessagesPerSecond; zero when not given.
	Rate    int    `json:"rate,omitempty"`
	Moved   int64  `json:"moved"`
	ToMove  int64  `json:"toMove"`
	Started int64  `json:"started"` // Unix milliseconds
	Failure string `json:"failure,omitempty"`
	// Owner is the worker id of the server that runs the task, and Beat
	// when it last wrote the task's progress, in Unix milliseconds.
	Owner string `json:"owner"`
	Beat  int64  `json:"beat"`
}

// key is the task's attribute in its source's record: in order of start.
func (t *moveTask) key() string { return fmt.Sprintf("%s%020d:%s", taskPrefix, t.Started, t.ID) }

// taskHandle is a task's TaskHandle: its source's ARN and its id.
type taskHandle struct {
	TaskID    string `json:"taskId"`
	SourceArn string `json:"sourceArn"`
}

func (a *API) handleOf(r *http.Request, source string, t *moveTask) string {
	b, _ := json.Marshal(taskHandle{TaskID: t.ID, SourceArn: a.queueARN(r, source)})
	return base64.StdEncoding.EncodeToString(b)
}

// tasksOf reads the tasks kept in a source queue's record, the most
// recent first.
func tasksOf(rec store.QueueInfo) []*moveTask {
	keys := slices.Sorted(maps.Keys(rec.Attributes))
	var out []*moveTask
	for _, k := range slices.Backward(keys) {
		if !strings.HasPrefix(k, taskPrefix) {
			continue
		}
		var t moveTask
		if json.Unmarshal([]byte(rec.Attributes[k]), &t) == nil {
			if t.Status == taskRunning && rec.Attributes[cancelPrefix+t.ID] != "" {
				t.Status = taskCancelling
			}
			out = append(out, &t)
		}
	}
	return out
}

// saveTask writes a task's state into its source's record.
func (a *API) saveTask(ctx context.Context, source string, t *moveTask) error {
	if t.Status == taskCancelling {
		t.Status = taskRunning // the cancel is an attribute of its own
	}
	b, _ := json.Marshal(t)
	_, err := a.st.SetQueueAttributes(ctx, source, map[string]string{t.key(): string(b)})
	return err
}

// stale reports whether a running task's runner has not written its
// progress for staleTask.
func (a *API) stale(t *moveTask) bool {
	return a.clk.Now().UnixMilli()-t.Beat >= staleTask.Milliseconds()
}

// sourceQueue reads the name of a source or destination ARN and the
// record of its queue, fresh: ResourceNotFoundException when there is
// none. A queue that Go programs fill is recorded, as lookup records it.
func (a *API) sourceQueue(ctx context.Context, what, arn string) (store.QueueInfo, error) {
	if arn == "" {
		return store.QueueInfo{}, errMissingParameter.f("the request must contain the parameter %s", what)
	}
	notFound := errResourceNotFound.f("The resource that you specified for the %s parameter doesn't exist.", what)
	name, ok := a.arnName(arn)
	if !ok {
		return store.QueueInfo{}, notFound
	}
	rec, err := a.st.QueueInfo(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		rec, err = a.adopt(ctx, name)
	}
	if missingQueue(err) {
		return store.QueueInfo{}, notFound
	}
	return rec, err
}

// watch lets this server run, or keep an eye on, the running tasks of a
// source's record that it does not run yet.
func (a *API) watch(source string, tasks []*moveTask) {
	for _, t := range tasks {
		if t.Status == taskRunning || t.Status == taskCancelling {
			a.movers.launch(a, source, t.ID)
		}
	}
}

func (a *API) startMessageMoveTask(ctx context.Context, c *call) (any, error) {
	var in struct {
		SourceArn                    string `json:"SourceArn"`
		DestinationArn               string `json:"DestinationArn"`
		MaxNumberOfMessagesPerSecond *int   `json:"MaxNumberOfMessagesPerSecond"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	src, err := a.sourceQueue(ctx, "SourceArn", in.SourceArn)
	if err != nil {
		return nil, err
	}
	t := &moveTask{ID: requestID(), Status: taskRunning, Owner: a.cfg.WorkerID}
	if in.DestinationArn != "" {
		dst, err := a.sourceQueue(ctx, "DestinationArn", in.DestinationArn)
		if err != nil {
			return nil, err
		}
		if dst.Queue == src.Queue {
			return nil, errInvalidParameter.f("the destination of a message move task must be another queue than its source")
		}
		if isFifoName(dst.Queue) != isFifoName(src.Queue) {
			return nil, errInvalidParameter.f("messages move from a FIFO queue to a FIFO queue and from a standard queue to a standard queue only")
		}
		t.Destination = dst.Queue
	}
	if r := in.MaxNumberOfMessagesPerSecond; r != nil {
		if *r < 1 || *r > maxMoveRate {
			return nil, errInvalidParameter.f("value %d for parameter MaxNumberOfMessagesPerSecond is invalid: it must be from 1 to %d", *r, maxMoveRate)
		}
		t.Rate = *r
	}
	sources, err := a.deadLetterSources(ctx, src.Queue, "", 1)
	if err != nil {
		return nil, err
	}
	if len(sources) == 0 {
		return nil, errInvalidParameter.f("Source queue must be configured as a Dead Letter Queue.")
	}
	a.movers.starting.Lock()
	defer a.movers.starting.Unlock()
	// Read again under the lock: of two starts on this server, the second
	// sees the first's task.
	if src, err = a.st.QueueInfo(ctx, src.Queue); err != nil {
		return nil, asMissingQueue(err, src.Queue)
	}
	tasks := tasksOf(src)
	for _, old := range tasks {
		if old.Status == taskRunning || old.Status == taskCancelling {
			a.watch(src.Queue, tasks)
			return nil, errInvalidParameter.f("There is already a task running. Only one active task is allowed for a source queue arn at a given time.")
		}
	}
	st, err := a.st.Stats(ctx, src.Queue)
	if err != nil {
		return nil, err
	}
	now := a.clk.Now().UnixMilli()
	// A FIFO dead-letter queue holds a group's later messages waiting
	// behind its first: they are moved too, each once the one before it
	// has gone.
	t.ToMove, t.Started, t.Beat = st.Pending-st.Delayed+st.Waiting, now, now
	b, _ := json.Marshal(t)
	attrs := map[string]string{t.key(): string(b)}
	// The oldest tasks make room: a source keeps maxTasksKept.
	for _, old := range tasks[min(len(tasks), maxTasksKept-1):] {
		attrs[old.key()], attrs[cancelPrefix+old.ID] = "", ""
	}
	if _, err := a.st.SetQueueAttributes(ctx, src.Queue, attrs); err != nil {
		return nil, asMissingQueue(err, src.Queue)
	}
	a.movers.launch(a, src.Queue, t.ID)
	return struct {
		TaskHandle string `json:"TaskHandle"`
	}{a.handleOf(c.r, src.Queue, t)}, nil
}

// taskEntry is a task as ListMessageMoveTasks shows it.
type taskEntry struct {
	TaskHandle                        string `json:"TaskHandle,omitempty"`
	Status                            string `json:"Status"`
	SourceArn                         string `json:"SourceArn"`
	DestinationArn                    string `json:"DestinationArn,omitempty"`
	MaxNumberOfMessagesPerSecond      *int   `json:"MaxNumberOfMessagesPerSecond,omitempty"`
	ApproximateNumberOfMessagesMoved  int64  `json:"ApproximateNumberOfMessagesMoved"`
	ApproximateNumberOfMessagesToMove int64  `json:"ApproximateNumberOfMessagesToMove"`
	FailureReason                     string `json:"FailureReason,omitempty"`
	StartedTimestamp                  int64  `json:"StartedTimestamp"`
}

func (a *API) listMessageMoveTasks(ctx context.Context, c *call) (any, error) {
	var in struct {
		SourceArn  string `json:"SourceArn"`
		MaxResults *int   `json:"MaxResults"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	limit := 1
	if m := in.MaxResults; m != nil {
		if *m < 1 || *m > maxTasksKept {
			return nil, errInvalidParameter.f("value %d for parameter MaxResults is invalid: it must be from 1 to %d", *m, maxTasksKept)
		}
		limit = *m
	}
	src, err := a.sourceQueue(ctx, "SourceArn", in.SourceArn)
	if err != nil {
		return nil, err
	}
	tasks := tasksOf(src)
	a.watch(src.Queue, tasks)
	out := struct {
		Results []taskEntry `json:"Results"`
	}{Results: []taskEntry{}}
	for _, t := range tasks[:min(limit, len(tasks))] {
		e := taskEntry{Status: t.Status, SourceArn: a.queueARN(c.r, src.Queue), ApproximateNumberOfMessagesMoved: t.Moved,
			ApproximateNumberOfMessagesToMove: t.ToMove, FailureReason: t.Failure, StartedTimestamp: t.Started}
		if t.Status == taskRunning {
			e.TaskHandle = a.handleOf(c.r, src.Queue, t)
		}
		if t.Destination != "" {
			e.DestinationArn = a.queueARN(c.r, t.Destination)
		}
		if t.Rate > 0 {
			e.MaxNumberOfMessagesPerSecond = &t.Rate
		}
		out.Results = append(out.Results, e)
	}
	return out, nil
}

func (a *API) cancelMessageMoveTask(ctx context.Context, c *call) (any, error) {
	var in struct {
		TaskHandle string `json:"TaskHandle"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if in.TaskHandle == "" {
		return nil, errMissingParameter.f("the request must contain the parameter TaskHandle")
	}
	var h taskHandle
	b, err := base64.StdEncoding.DecodeString(in.TaskHandle)
	if err != nil || json.Unmarshal(b, &h) != nil || h.TaskID == "" {
		return nil, errInvalidParameter.f("Value for parameter TaskHandle is invalid.")
	}
	src, err := a.sourceQueue(ctx, "SourceArn", h.SourceArn)
	if err != nil {
		return nil, err
	}
	tasks := tasksOf(src)
	i := slices.IndexFunc(tasks, func(t *moveTask) bool { return t.ID == h.TaskID })
	if i < 0 {
		return nil, errResourceNotFound.f("Task does not exist.")
	}
	t := tasks[i]
	switch t.Status {
	case taskRunning:
	case taskCancelling:
		return struct {
			ApproximateNumberOfMessagesMoved int64 `json:"ApproximateNumberOfMessagesMoved"`
		}{t.Moved}, nil
	default:
		return nil, errUnsupported.f("the message move task %s is %s: only a running task can be cancelled", h.TaskID, t.Status)
	}
	if _, err := a.st.SetQueueAttributes(ctx, src.Queue, map[string]string{cancelPrefix + t.ID: "1"}); err != nil {
		return nil, asMissingQueue(err, src.Queue)
	}
	// The runner ends the task at its next batch; a runner that stopped
	// writing long ago is gone, and the task ends here.
	if a.stale(t) && !a.movers.runs(t.ID) {
		t.Status = taskCancelled
		if err := a.saveTask(ctx, src.Queue, t); err != nil {
			return nil, asMissingQueue(err, src.Queue)
		}
	} else {
		a.watch(src.Queue, tasks[i:i+1])
	}
	return struct {
		ApproximateNumberOfMessagesMoved int64 `json:"ApproximateNumberOfMessagesMoved"`
	}{t.Moved}, nil
}

// movers are the goroutines that run this server's move tasks, or keep an
// eye on those others run, one per task, while RunMoveTasks runs.
type movers struct {
	// starting serialises this server's starts, so that one source never
	// gets two tasks from here.
	starting sync.Mutex

	mu  sync.Mutex
	ctx context.Context // nil unless RunMoveTasks runs
	ids map[string]bool // tasks with a goroutine here
	wg  sync.WaitGroup
}

// launch runs a task of source here, unless it runs here already or
// RunMoveTasks does not run.
func (m *movers) launch(a *API, source, id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx == nil || m.ids[id] {
		return
	}
	m.ids[id] = true
	ctx := m.ctx
	m.wg.Go(func() {
		defer func() {
			m.mu.Lock()
			delete(m.ids, id)
			m.mu.Unlock()
		}()
		a.runTask(ctx, source, id)
	})
}

// runs reports whether a task runs here.
func (m *movers) runs(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ids[id]
}

// wait waits for every task goroutine to end.
func (m *movers) wait() { m.wg.Wait() }

// RunMoveTasks runs this server's message move tasks until ctx ends: the
// running tasks it finds when it starts, in the record of every queue (a
// page of queue names at a time, once: so many reads as there are queues),
// and those started or looked at since. It returns once every task
// goroutine has stopped; a task stays running in the database, for the
// next server to go on with.
func (a *API) RunMoveTasks(ctx context.Context) error {
	a.movers.mu.Lock()
	if a.movers.ctx != nil {
		a.movers.mu.Unlock()
		return errors.New("sqsapi: RunMoveTasks is running already")
	}
	a.movers.ctx, a.movers.ids = ctx, map[string]bool{}
	a.movers.mu.Unlock()
	defer func() {
		a.movers.wait()
		a.movers.mu.Lock()
		a.movers.ctx = nil
		a.movers.mu.Unlock()
	}()
	after := ""
	for {
		names, err := a.st.QueuePage(ctx, after, "", 1000)
		if err != nil {
			if ctx.Err() == nil {
				a.log.Error("message move tasks: listing the queues to resume their running tasks failed", "error", err)
			}
			break
		}
		for _, n := range names {
			rec, err := a.st.QueueInfo(ctx, n)
			if err == nil {
				a.watch(n, tasksOf(rec))
			}
		}
		if len(names) < 1000 {
			break
		}
		after = names[len(names)-1]
	}
	<-ctx.Done()
	// Stop every task's loop before the deferred wait: launch starts no
	// more once ctx is done.
	a.movers.mu.Lock()
	a.movers.ctx = nil
	a.movers.mu.Unlock()
	return nil
}

// runTask runs one task of source until it ends, the queue is deleted or
// ctx ends; while another server runs it, it reads its record every
// staleTask/2 and takes it over once it goes stale.
func (a *API) runTask(ctx context.Context, source, id string) {
	for ctx.Err() == nil {
		wait, done := a.moveBatch(ctx, source, id)
		if done {
			return
		}
		if wait > 0 {
			// A timer, not Sleep: a test's fake clock moves on its own
			// word, while the runner waits.
			t := a.clk.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
		}
	}
}

// moveBatch does one step of a task: it reads the task, and, when this
// server runs it, moves one batch and writes the progress. It returns how
// long to wait before the next step, or that the task is over here.
func (a *API) moveBatch(ctx context.Context, source, id string) (time.Duration, bool) {
	rec, err := a.st.QueueInfo(ctx, source)
	if errors.Is(err, store.ErrNotFound) {
		return 0, true // the queue and its tasks were deleted
	}
	if err != nil {
		return a.moveFailed(ctx, source, id, err)
	}
	tasks := tasksOf(rec)
	i := slices.IndexFunc(tasks, func(t *moveTask) bool { return t.ID == id })
	if i < 0 || (tasks[i].Status != taskRunning && tasks[i].Status != taskCancelling) {
		return 0, true
	}
	t := tasks[i]
	if t.Owner != a.cfg.WorkerID {
		if !a.stale(t) {
			return staleTask / 2, false
		}
		a.log.Info("message move task: taking over a task whose server stopped writing its progress", "queue", source, "task", id, "owner", t.Owner)
		t.Owner = a.cfg.WorkerID
	}
	start := a.clk.Monotonic()
	switch {
	case t.Status == taskCancelling:
		t.Status = taskCancelled
	case t.Moved >= t.ToMove:
		t.Status = taskCompleted
	default:
		n, err := a.moveSome(ctx, source, t)
		var ae *apiError
		if errors.As(err, &ae) {
			// FailureReason is the error's code, as Amazon SQS gives it
			// (AWS.SimpleQueueService.NonExistentQueue for a queue
			// deleted under the task); the log says which queue.
			t.Status, t.Failure = taskFailed, ae.code
			a.log.Info("message move task failed", "queue", source, "task", id, "reason", ae.message)
		} else if err != nil {
			return a.moveFailed(ctx, source, id, err)
		}
		t.Moved += int64(n)
		if (n == 0 || t.Moved >= t.ToMove) && t.Status == taskRunning {
			t.Status = taskCompleted // nothing left to move, or all that was
		}
	}
	t.Beat = a.clk.Now().UnixMilli()
	if err := a.saveTask(ctx, source, t); errors.Is(err, store.ErrNotFound) {
		return 0, true
	} else if err != nil {
		return a.moveFailed(ctx, source, id, err)
	}
	if t.Status != taskRunning {
		return 0, true
	}
	if t.Rate == 0 {
		return 0, false
	}
	return max(time.Second-(a.clk.Monotonic()-start), 0), false
}

// moveSome moves the next batch of a task, as one store transaction. An
// apiError says why the task cannot go on.
func (a *API) moveSome(ctx context.Context, source string, t *moveTask) (int, error) {
	m := store.Move{Queue: source, State: store.Pending, To: t.Destination, MaxDeliveries: store.MaxDeliveriesLimit,
		Limit: int(min(int64(cmp.Or(t.Rate, moveBatch)), t.ToMove-t.Moved))}
	if t.Destination != "" {
		// A named destination's messages get its redrive policy, as sent
		// ones do. Messages sent back to their sources get no budget of
		// the store's: each source's policy holds at receive.
		rec, err := a.st.QueueInfo(ctx, t.Destination)
		if errors.Is(err, store.ErrNotFound) {
			return 0, errQueueDoesNotExist.f("the destination queue %s no longer exists", t.Destination)
		}
		if err != nil {
			return 0, err
		}
		q := newQueue(rec)
		m.MaxDeliveries, m.DeadLetterQueue = q.maxDeliveries(), q.deadLetterQueue
		if m.DeadLetterQueue == t.Destination {
			m.DeadLetterQueue = ""
		}
	}
	// The store moves nothing into a queue without a record, checked in
	// the batch's transaction: a destination deleted since the check
	// above, or a message's source deleted since it died. The batch stays
	// where it is, and the task fails.
	n, err := a.st.Move(ctx, m)
	if missing, ok := errors.AsType[*store.NoRecordError](err); ok {
		if t.Destination != "" {
			return 0, errQueueDoesNotExist.f("the destination queue %s no longer exists", t.Destination)
		}
		return 0, errQueueDoesNotExist.f("the queue %s that messages were dead-lettered from no longer exists; they stay in %s", missing.Queue, source)
	}
	return n, err
}

// moveFailed logs a store error of a task's step, which is tried again
// after moveRetry.
func (a *API) moveFailed(ctx context.Context, source, id string, err error) (time.Duration, bool) {
	if ctx.Err() != nil {
		return 0, true
	}
	a.log.Error("message move task: a step failed; it is tried again", "queue", source, "task", id, "error", err)
	return moveRetry, false
}
