package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/clock"
)

// periodicKind is the kind of the messages work --periodic enqueues.
const periodicKind = "periodic"

// rawJob is a job whose payload is stored as it is, for a script.
type rawJob struct{ payload []byte }

func (rawJob) Kind() string { return periodicKind }

// rawCodec stores a rawJob's payload as it is, and anything else as JSON.
type rawCodec struct{ leasehold.JSON }

func (c rawCodec) Marshal(v any) ([]byte, error) {
	if r, ok := v.(rawJob); ok {
		return r.payload, nil
	}
	return json.Marshal(v)
}

// parsePeriodic reads a --periodic value, SCHEDULE|PAYLOAD, where SCHEDULE
// is a five-field cron expression, a descriptor such as @hourly, or
// "every DURATION". Workers given the same value share its ticks: its ID
// is a digest of it.
func parsePeriodic(queue, value string) (*leasehold.PeriodicJob, error) {
	spec, payload, ok := strings.Cut(value, "|")
	spec = strings.TrimSpace(spec)
	if !ok || spec == "" {
		return nil, usagef("--periodic %q: want SCHEDULE|PAYLOAD, such as '*/5 * * * *|ping' or 'every 1h|report'", value)
	}
	var sched leasehold.Schedule
	if d, isEvery := strings.CutPrefix(spec, "every "); isEvery {
		period, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil || period <= 0 {
			return nil, usagef("--periodic %q: %q is not a positive duration", value, d)
		}
		sched = leasehold.Every(period)
	} else {
		var err error
		if sched, err = leasehold.Cron(spec); err != nil {
			return nil, usagef("--periodic %q: %v", value, err)
		}
		if sched.Next(clock.System().Now()).IsZero() {
			return nil, usagef("--periodic %q: the schedule never ticks", value)
		}
	}
	sum := sha256.Sum256([]byte(queue + "\x00" + value))
	body := []byte(payload)
	return leasehold.NewPeriodicJob(sched, func() (leasehold.JobArgs, *leasehold.EnqueueOptions) {
		return rawJob{payload: body}, &leasehold.EnqueueOptions{Queue: queue}
	}, &leasehold.PeriodicJobOpts{ID: "cli-" + hex.EncodeToString(sum[:8])}), nil
}
