package leasehold

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/store"
)

// JobState is where a job is in its life.
type JobState string

// The states of a job.
const (
	// JobStatePending: waiting to run, once its delay is over.
	JobStatePending JobState = "pending"
	// JobStateWaiting: behind an unfinished job of its key.
	JobStateWaiting JobState = "waiting"
	// JobStateRunning: held by a worker under a lease.
	JobStateRunning JobState = "running"
	// JobStateCompleted: its handler succeeded.
	JobStateCompleted JobState = "completed"
	// JobStateDead: it failed for good, or used up its deliveries.
	JobStateDead JobState = "dead"
	// JobStateCancelled: cancelled before it finished.
	JobStateCancelled JobState = "cancelled"
)

// jobStates are the job states by the store's states of their messages.
var jobStates = [store.States]JobState{
	store.Pending: JobStatePending, store.Waiting: JobStateWaiting, store.Processing: JobStateRunning,
	store.Completed: JobStateCompleted, store.Dead: JobStateDead, store.Cancelled: JobStateCancelled,
}

// jobState is the job state of a message in state s.
func jobState(s store.State) JobState {
	if s < 0 || int(s) >= store.States {
		return JobState(s.String())
	}
	return jobStates[s]
}

// storeStates are the store's states of states, in order, or an error
// naming the first that is not a job state.
func storeStates(states []JobState) ([]store.State, error) {
	out := make([]store.State, len(states))
	for i, js := range states {
		j := slices.Index(jobStates[:], js)
		if j < 0 {
			return nil, fmt.Errorf("%w: %q is not a job state (pending, waiting, running, completed, dead, cancelled)", store.ErrInvalid, js)
		}
		out[i] = store.State(j)
	}
	return out, nil
}

// UniqueOpts make a job unique: while an equal job is in one of ByState,
// enqueueing another returns the first's id with Duplicate set, and adds
// nothing. Two jobs are equal when they are of the same kind and equal by
// each of the fields set. Enqueues of equal jobs at once, from any
// processes, make one job. The zero value makes no job unique; any field
// set does (ByState alone: one job of the kind at a time in those states).
// The check is made at enqueue: a job that later returns to one of the
// states (a retry by the job API, a redrive) may stand beside an equal one.
type UniqueOpts struct {
	// ByArgs makes the job's args part of its identity: all of them as
	// the Codec encodes them, or, when the args are a struct with fields
	// tagged `unique:"true"`, those fields only, by their JSON names.
	ByArgs bool
	// ByPeriod makes jobs enqueued within one period equal: the periods
	// are the multiples of ByPeriod since the Unix epoch, by the client's
	// Clock, so that processes agree. Zero: any time.
	ByPeriod time.Duration
	// ByQueue makes the job's queue part of its identity. False: an equal
	// job on any queue counts.
	ByQueue bool
	// ByState are the states in which an equal job makes this one a
	// duplicate. Default: every state but dead and cancelled, so that a
	// job that ran once is not enqueued again until it is pruned (see
	// Config.CompletedRetention), while one that failed for good or was
	// cancelled does not stand in the way.
	ByState []JobState
}

func (u *UniqueOpts) isZero() bool {
	return u == nil || !u.ByArgs && u.ByPeriod == 0 && !u.ByQueue && len(u.ByState) == 0
}

// uniqueKey gives the store's unique key of a job of kind on queue, its
// args given and encoded as payload, enqueued at now: a digest of what
// UniqueOpts make its identity.
func (u UniqueOpts) uniqueKey(kind, queue string, args JobArgs, payload []byte, now time.Time) (string, error) {
	if u.ByPeriod < 0 {
		return "", fmt.Errorf("UniqueOpts.ByPeriod is %s, must not be negative", u.ByPeriod)
	}
	h := sha256.New()
	part := func(name string, value []byte) {
		fmt.Fprintf(h, "%s=%d:", name, len(value))
		h.Write(value)
	}
	part("kind", []byte(kind))
	if u.ByQueue {
		part("queue", []byte(queue))
	}
	if u.ByPeriod > 0 {
		ns := now.UnixNano()
		start := ns - ((ns%int64(u.ByPeriod))+int64(u.ByPeriod))%int64(u.ByPeriod)
		part("period", []byte(fmt.Sprint(start)))
	}
	if u.ByArgs {
		fields, err := uniqueFields(args)
		if err != nil {
			return "", err
		}
		if fields == nil {
			fields = payload
		}
		part("args", fields)
	}
	return "unique:" + hex.EncodeToString(h.Sum(nil)), nil
}

// uniqueFields gives the JSON of the fields of args tagged
// `unique:"true"`, by their JSON names, or nil when args is not a struct
// or has none.
func uniqueFields(args JobArgs) ([]byte, error) {
	v := reflect.ValueOf(args)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil, nil
	}
	picked := map[string]any{}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Tag.Get("unique") != "true" {
			continue
		}
		if !f.IsExported() {
			return nil, fmt.Errorf("%s.%s is tagged unique but not exported", v.Type(), f.Name)
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			name = f.Name
		}
		picked[name] = v.Field(i).Interface()
	}
	if len(picked) == 0 {
		return nil, nil
	}
	return json.Marshal(picked) // a map's keys are written sorted
}
