package leasehold

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/leasehold/leasehold/internal/jobmeta"
	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
)

// Errors of the job API. Each is the store's error of the same condition,
// so that errors.Is matches either name.
var (
	// ErrJobNotFound reports that no job has the id: it never existed,
	// or was deleted or pruned. It is store.ErrNotFound.
	ErrJobNotFound = store.ErrNotFound
	// ErrJobRunning reports that a running job refused a retry or a
	// delete, which changed nothing: cancel it first (Client.Cancel), or
	// wait for it to finish. It is store.ErrProcessing.
	ErrJobRunning = store.ErrProcessing
)

// AttemptError is an error of one attempt of a job: the attempt it ended,
// when, on which worker, and its text.
type AttemptError = store.AttemptError

// JobRow is a job as the store holds it, for admin tools and dashboards.
type JobRow struct {
	ID    int64
	Queue string
	Kind  string
	// Key orders the jobs of a queue that share it: one runs at a time,
	// in enqueue order. Empty for none.
	Key   string
	State JobState
	// Args are the job's arguments as they were encoded at
	// enqueue (JSON unless the client's Codec says otherwise).
	Args []byte
	// Metadata are the job's metadata (EnqueueOptions.Metadata, and what
	// enqueue middleware added); nil for none.
	Metadata map[string]string
	// Attributes are the message's attributes as stored: the client's
	// encoding of Metadata, or the SQS API's message attributes.
	Attributes []byte
	// Attempt counts the job's claims, the running one included: zero
	// before its first, and again after a retry (JobRetry, a redrive).
	Attempt int
	// MaxDeliveries is how many claims the job gets before it is dead.
	MaxDeliveries int
	Priority      int
	// DedupID is the job's dedup id; empty for none.
	DedupID string
	// EnqueuedAt is when the job was enqueued.
	EnqueuedAt time.Time
	// ScheduledAt is when the job is, or was last, to be visible to
	// workers: its enqueue time, delay, retry delay or retry.
	ScheduledAt time.Time
	// AttemptedAt is when the job's first claim took it; zero while it
	// was never claimed.
	AttemptedAt time.Time
	// FinishedAt is when the job completed, died or was cancelled; zero
	// while it has not.
	FinishedAt time.Time
	// LeaseExpires is when the running job's lease runs out unless its
	// worker renews it; zero unless running.
	LeaseExpires time.Time
	// WorkerID names the worker that last claimed the job; empty while
	// none has.
	WorkerID string
	// FencingToken is the token of the job's last claim, which its
	// handler passes downstream; zero before its first claim and after a
	// retry.
	FencingToken int64
	// LastError is the error of the job's last failed attempt; empty for
	// none.
	LastError string
	// DeadReason says why a dead job died; empty otherwise.
	DeadReason store.DeadReason
	// DeadLetterQueue is where the job moves when it dies; empty for
	// none. DeadLetterSource is the queue it died in before it moved
	// here; empty when it did not.
	DeadLetterQueue, DeadLetterSource string
	// Snoozes counts the times its handler snoozed it (Snooze). JobGet
	// fills it; JobList leaves it zero.
	Snoozes int
	// Errors are the job's newest errors (store.MaxErrors of them),
	// oldest first, kept through retries. JobGet fills them; JobList
	// leaves them nil.
	Errors []AttemptError
}

// JobRowOf is the job that a message the store lists or gets (Info)
// holds, for programs and test kits that read the store directly. Its
// Metadata are decoded from the message's attributes.
func JobRowOf(in store.Info) *JobRow {
	return &JobRow{
		ID: in.ID, Queue: in.Queue, Kind: in.Kind, Key: in.Key, State: jobState(in.State),
		Args: in.Payload, Metadata: jobmeta.Decode(in.Attributes), Attributes: in.Attributes,
		Attempt: in.Deliveries, MaxDeliveries: in.MaxDeliveries, Priority: in.Priority, DedupID: in.DedupID,
		EnqueuedAt: in.EnqueuedAt, ScheduledAt: in.VisibleAt, AttemptedAt: in.FirstClaimedAt, FinishedAt: in.FinishedAt,
		LeaseExpires: in.LeaseExpires, WorkerID: in.WorkerID, FencingToken: in.FencingToken,
		LastError: in.LastError, DeadReason: in.DeadReason,
		DeadLetterQueue: in.DeadLetterQueue, DeadLetterSource: in.DeadLetterSource,
		Errors: in.Errors, Snoozes: in.Snoozes,
	}
}

// JobGet returns the job with the id, of any queue and in any state, its
// error history included. A missing job is an error wrapping
// ErrJobNotFound.
func (c *Client[TTx]) JobGet(ctx context.Context, id int64) (*JobRow, error) {
	in, err := c.st.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("leasehold: get job %d: %w", id, err)
	}
	return JobRowOf(in), nil
}

// DefaultJobListLimit is how many jobs JobList lists when
// JobListParams.Limit is zero.
const DefaultJobListLimit = 100

// JobListParams select the jobs JobList lists: those that pass every
// filter that is set.
type JobListParams struct {
	// Queue lists the jobs of one queue. Empty: of every queue that holds
	// jobs, is paused or has a record (store.Store.Queues), which costs
	// one store listing per queue and state: name the queue when there
	// are many.
	Queue string
	// Kind lists the jobs of this kind only. Completed jobs are read
	// through an index of their kind; in other states jobs of other kinds
	// are read and passed over, as there are few of them.
	Kind string
	// Key lists the jobs with this key only, read through an index of
	// the key.
	Key string
	// States lists the jobs in these states only. Empty: in every state.
	// A state listed twice counts once.
	States []JobState
	// After lists the jobs with larger ids only: the next page of an
	// ascending listing starts after the last id of the page before.
	After int64
	// Before, when positive, lists the jobs with smaller ids only, newest
	// first: the page before one that starts at Before. With After too,
	// the jobs between them, newest first.
	Before int64
	// Limit is how many jobs to list at most: 1 to store.MaxBatch; zero
	// means DefaultJobListLimit.
	Limit int
}

// check validates p and returns its states, each once in order, and its
// limit, defaulted.
func (p JobListParams) check() ([]store.State, int, error) {
	switch {
	case p.Limit < 0 || p.Limit > store.MaxBatch:
		return nil, 0, fmt.Errorf("%w: limit %d is not 1 to %d (0 means %d)", store.ErrInvalid, p.Limit, store.MaxBatch, DefaultJobListLimit)
	case p.After < 0:
		return nil, 0, fmt.Errorf("%w: After %d is negative", store.ErrInvalid, p.After)
	case p.Before < 0:
		return nil, 0, fmt.Errorf("%w: Before %d is negative", store.ErrInvalid, p.Before)
	}
	states := p.States
	if len(states) == 0 {
		states = []JobState{JobStatePending, JobStateWaiting, JobStateRunning, JobStateCompleted, JobStateDead, JobStateCancelled}
	}
	all, err := storeStates(states)
	if err != nil {
		return nil, 0, err
	}
	var once []store.State
	for _, s := range all {
		if !slices.Contains(once, s) {
			once = append(once, s)
		}
	}
	limit := cmp.Or(p.Limit, DefaultJobListLimit)
	// The filters are checked as the store checks them, once, so that a
	// bad one is refused even when there is no queue to list.
	f := store.ListFilter{Queue: cmp.Or(p.Queue, DefaultQueue), State: once[0], Kind: p.Kind, Key: p.Key, Limit: limit}
	if _, err := storecore.CheckListFilter(f); err != nil {
		return nil, 0, err
	}
	return once, limit, nil
}

// JobListResult is a page of jobs that JobList listed.
type JobListResult struct {
	// Jobs are the page's jobs, in the listing's order.
	Jobs []*JobRow
	// Next is the cursor of the next page: pass it as After (or, for a
	// listing newest first, as Before) to list it. Zero when there is no
	// more.
	Next int64
}

// JobList lists a page of jobs by id: ascending, or, when p.Before is
// set, descending, newest first. A nil p lists the first page of every
// job. Each listed job's Errors are nil (a page has no use for every
// error of each job); JobGet gives them. Bad parameters are an error
// wrapping store.ErrInvalid, naming the problem.
//
// It runs one store listing per queue and state, each reading at most
// the page's limit (and one) of ids from an index of the state (or of the
// key, or of a completed job's kind), never the history, and merges them
// by id. The listings are not one snapshot: a job that changes state
// meanwhile may show in two states' listings, as two rows, or in none.
func (c *Client[TTx]) JobList(ctx context.Context, params *JobListParams) (*JobListResult, error) {
	var p JobListParams
	if params != nil {
		p = *params
	}
	states, limit, err := p.check()
	if err != nil {
		return nil, fmt.Errorf("leasehold: list jobs: %w", err)
	}
	queues := []string{p.Queue}
	if p.Queue == "" {
		if queues, err = c.st.Queues(ctx); err != nil {
			return nil, fmt.Errorf("leasehold: list jobs: %w", err)
		}
	}
	// One more than the page, where the store allows, tells whether
	// there is a next page.
	read := min(limit+1, store.MaxBatch)
	var infos []store.Info
	for _, q := range queues {
		for _, s := range states {
			page, err := c.st.List(ctx, store.ListFilter{Queue: q, State: s, Kind: p.Kind, Key: p.Key,
				AfterID: p.After, BeforeID: p.Before, Limit: read})
			if err != nil {
				return nil, fmt.Errorf("leasehold: list jobs: %w", err)
			}
			infos = append(infos, page...)
		}
	}
	slices.SortFunc(infos, func(a, b store.Info) int {
		if p.Before > 0 {
			return cmp.Compare(b.ID, a.ID)
		}
		return cmp.Compare(a.ID, b.ID)
	})
	res := &JobListResult{Jobs: make([]*JobRow, min(len(infos), limit))}
	for i := range res.Jobs {
		res.Jobs[i] = JobRowOf(infos[i])
	}
	if len(infos) > limit || (read == limit && len(infos) == limit) {
		res.Next = infos[limit-1].ID
	}
	return res, nil
}

// JobRetry makes a job run again now and returns it as it stands after:
//
//   - a completed, dead or cancelled job becomes pending, visible at once,
//     with a fresh budget of attempts (Attempt zero), or waiting behind
//     the unfinished job that heads its key's line; no lease from before
//     reaches it, its error history stays;
//   - a pending job scheduled for later becomes visible now;
//   - a waiting job is left as it is: its key's line says when it runs.
//
// A running job refuses, with an error wrapping ErrJobRunning, and a
// missing one with an error wrapping ErrJobNotFound; neither changes
// anything. A retried unique job may stand beside an equal one enqueued
// since: uniqueness is checked at enqueue.
func (c *Client[TTx]) JobRetry(ctx context.Context, id int64) (*JobRow, error) {
	if err := c.st.Rerun(ctx, []int64{id}); err != nil {
		return nil, jobRefused("retry", id, err)
	}
	return c.JobGet(ctx, id)
}

// JobDelete deletes a job in any state but running and returns it as it
// was read just before. Deleting the pending job that heads its key's
// line lets the key's next job go. A running job refuses, with an error
// wrapping ErrJobRunning, and a missing one with an error wrapping
// ErrJobNotFound; neither changes anything.
func (c *Client[TTx]) JobDelete(ctx context.Context, id int64) (*JobRow, error) {
	in, err := c.st.Get(ctx, id)
	if err == nil && in.State == store.Processing {
		err = store.ErrProcessing
	}
	if err == nil {
		err = c.st.Delete(ctx, []int64{id})
	}
	if err != nil {
		return nil, jobRefused("delete", id, err)
	}
	return JobRowOf(in), nil
}

// jobRefused is the error of a job operation op on the job with the id
// that the store refused with err.
func jobRefused(op string, id int64, err error) error {
	if errors.Is(err, ErrJobRunning) {
		return fmt.Errorf("leasehold: %s job %d: %w: cancel it first, or wait for it to finish", op, id, ErrJobRunning)
	}
	return fmt.Errorf("leasehold: %s job %d: %w", op, id, err)
}
