package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/internal/sqsid"
	"github.com/leasehold/leasehold/store"
)

// statsJSON is one queue's line of `stats --json`.
type statsJSON struct {
	Queue                   string  `json:"queue"`
	Pending                 int64   `json:"pending"`
	Delayed                 int64   `json:"delayed"`
	Waiting                 int64   `json:"waiting"`
	Processing              int64   `json:"processing"`
	Completed               int64   `json:"completed"`
	Dead                    int64   `json:"dead"`
	Cancelled               int64   `json:"cancelled"`
	BlockedKeys             int64   `json:"blocked_keys"`
	OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
	Paused                  bool    `json:"paused"`
}

func (a *app) statsCommand() *cobra.Command {
	var queue string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats [--queue Q] [--json]",
		Short: "Count each queue's messages by state",
		Long: `stats prints, per queue: pending (visible or delayed), of those the
delayed (not visible yet: a delay, a retry's or a release's), waiting behind
their key, in flight, completed, dead, cancelled, the age of the oldest
visible pending message, the keys blocked by an unfinished head, and
whether the queue is paused (see queue pause). It reads only live
messages and a count of completed ones, so it answers as fast with millions
of completed messages as with none, and it never changes the database.`,
		Example: `  leasehold stats
  leasehold stats --queue emails --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if queue != "" {
				if err := requireQueue(queue); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			st, err := a.openRead(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			queues := []string{queue}
			if queue == "" {
				if queues, err = st.Queues(ctx); err != nil {
					return err
				}
			}
			var tw *tabwriter.Writer
			if !asJSON {
				tw = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "QUEUE\tPENDING\tDELAYED\tWAITING\tPROCESSING\tCOMPLETED\tDEAD\tCANCELLED\tBLOCKED KEYS\tOLDEST PENDING\tPAUSED")
			}
			enc := json.NewEncoder(a.stdout)
			for _, q := range queues {
				s, err := st.Stats(ctx, q)
				if err != nil {
					return err
				}
				if asJSON {
					if err := enc.Encode(statsJSON{Queue: q, Pending: s.Pending, Delayed: s.Delayed, Waiting: s.Waiting, Processing: s.Processing,
						Completed: s.Completed, Dead: s.Dead, Cancelled: s.Cancelled, BlockedKeys: s.BlockedKeys, OldestPendingAgeSeconds: s.OldestPendingAge.Seconds(),
						Paused: s.Paused}); err != nil {
						return err
					}
					continue
				}
				paused := "no"
				if s.Paused {
					paused = "yes"
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", escape(q), s.Pending, s.Delayed, s.Waiting, s.Processing, s.Completed, s.Dead,
					s.Cancelled, s.BlockedKeys, s.OldestPendingAge.Round(time.Millisecond), paused)
			}
			if tw != nil {
				return tw.Flush()
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&queue, "queue", "", "only this queue")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per queue")
	return cmd
}

// infoJSON is one message's line of `list --json`.
type infoJSON struct {
	ID            int64      `json:"id"`
	SQSMessageID  string     `json:"sqs_message_id,omitempty"`
	Queue         string     `json:"queue"`
	Key           string     `json:"key"`
	DedupID       string     `json:"dedup_id,omitempty"`
	Kind          string     `json:"kind,omitempty"`
	Priority      int        `json:"priority"`
	State         string     `json:"state"`
	Deliveries    int        `json:"deliveries"`
	MaxDeliveries int        `json:"max_deliveries"`
	FencingToken  int64      `json:"fencing_token"`
	WorkerID      string     `json:"worker_id,omitempty"`
	LastError     string     `json:"last_error"`
	DeadReason    string     `json:"dead_reason,omitempty"`
	EnqueuedAt    time.Time  `json:"enqueued_at"`
	FinishedAt    *time.Time `json:"finished_at,omitempty"`
	Payload       string     `json:"payload"`
	// PayloadBase64 holds a payload that is not valid UTF-8 (Payload is
	// then empty).
	PayloadBase64 string `json:"payload_base64,omitempty"`
}

func toInfoJSON(in store.Info, ids sqsid.Mapper) infoJSON {
	j := infoJSON{ID: in.ID, SQSMessageID: ids.MessageID(in.ID), Queue: in.Queue, Key: in.Key, DedupID: in.DedupID, Kind: in.Kind, Priority: in.Priority, State: in.State.String(), Deliveries: in.Deliveries,
		MaxDeliveries: in.MaxDeliveries, FencingToken: in.FencingToken, WorkerID: in.WorkerID, LastError: in.LastError,
		DeadReason: string(in.DeadReason), EnqueuedAt: in.EnqueuedAt}
	j.Payload, j.PayloadBase64 = payloadJSON(in.Payload)
	if !in.FinishedAt.IsZero() {
		f := in.FinishedAt
		j.FinishedAt = &f
	}
	return j
}

// payloadJSON returns a payload as text when it is valid UTF-8, else in
// base64.
func payloadJSON(p []byte) (text, b64 string) {
	if utf8.Valid(p) {
		return string(p), ""
	}
	return "", base64.StdEncoding.EncodeToString(p)
}

// listStates are the states `list` shows without --state, in order.
var listStates = []store.State{store.Pending, store.Waiting, store.Processing, store.Completed, store.Dead, store.Cancelled}

func (a *app) listCommand() *cobra.Command {
	var queue, state, key, kind string
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "list --queue Q [--state pending|waiting|processing|completed|dead|cancelled] [--key K] [--kind KIND] [--json]",
		Short: "List a queue's messages",
		Long: `list prints a queue's messages by id, in one state or in every state, of
one key or one kind when --key or --kind says so. For a completed message
the fencing token is that of the lease that completed it.`,
		Example: `  leasehold list --queue emails
  leasehold list --queue emails --state dead --json
  leasehold list --queue orders --key customer-7`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireQueue(queue); err != nil {
				return err
			}
			states := listStates
			if state != "" {
				s, err := store.ParseState(state)
				if err != nil {
					return usagef("--state: %v", err)
				}
				states = []store.State{s}
			}
			if limit < 1 {
				return usagef("--limit %d: must be at least 1", limit)
			}
			ctx := cmd.Context()
			st, err := a.openRead(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			ids := a.messageIDs(ctx, st, queue)
			var tw *tabwriter.Writer
			if !asJSON {
				tw = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\t"+sqsColumn(ids, "SQS MESSAGE ID\t")+"STATE\tKEY\tDELIVERIES\tFENCING TOKEN\tLAST ERROR\tPAYLOAD")
			}
			enc := json.NewEncoder(a.stdout)
			left := limit
			for _, s := range states {
				n, err := eachMessage(ctx, st, store.ListFilter{Queue: queue, State: s, Key: key, Kind: kind, Limit: left}, tw, func(in store.Info) error {
					if asJSON {
						return enc.Encode(toInfoJSON(in, ids))
					}
					_, err := fmt.Fprintf(tw, "%d\t%s%s\t%s\t%d/%d\t%d\t%s\t%s\n", in.ID, sqsColumn(ids, ids.MessageID(in.ID)+"\t"), in.State, escape(in.Key), in.Deliveries, in.MaxDeliveries,
						in.FencingToken, clip(in.LastError, 60), clipBytes(in.Payload, 40))
					return err
				})
				if err != nil {
					return err
				}
				if left -= n; left == 0 {
					break
				}
			}
			if left == 0 {
				fmt.Fprintf(a.stderr, "leasehold: listed the first %d messages; raise --limit for more\n", limit)
			}
			if tw != nil {
				return tw.Flush()
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&queue, "queue", "", "queue name (required)")
	f.StringVar(&state, "state", "", "only messages in this state")
	f.StringVar(&key, "key", "", "only messages with this key")
	f.StringVar(&kind, "kind", "", "only messages of this kind")
	f.BoolVar(&asJSON, "json", false, "one JSON object per message")
	f.IntVar(&limit, "limit", 1000, "list at most this many messages")
	return cmd
}

// messageIDs is how the SQS API names the messages of a queue it knows
// (one with a record, which only the API makes): leasehold serve gives
// them UUIDs, made with the database's server secret, which exists once
// a server has run. Other queues get the zero Mapper, and their listings
// no SQS ids: reading their secret could make it, and a listing changes
// nothing. A secret that cannot be read gets a line on stderr.
func (a *app) messageIDs(ctx context.Context, st store.Store, queue string) sqsid.Mapper {
	if _, err := st.QueueInfo(ctx, queue); err != nil {
		return sqsid.Mapper{}
	}
	ids, err := serve.MessageIDs(ctx, st)
	if err != nil {
		fmt.Fprintf(a.stderr, "leasehold: SQS message ids are not shown: %v\n", err)
	}
	return ids
}

// sqsColumn is cell when ids map message ids, else nothing: a table has
// an SQS MESSAGE ID column only for the queues of the SQS API.
func sqsColumn(ids sqsid.Mapper, cell string) string {
	if ids.MessageID(1) == "" {
		return ""
	}
	return cell
}

// listBudget bounds the bytes of one page of a listing, so that a
// listing's memory does not grow with its rows or their payloads.
const listBudget = 8 << 20

// eachMessage calls fn for the messages f selects, at most f.Limit of
// them, in pages of up to listBudget bytes, flushing tw (when not nil)
// after each page. It returns how many it passed to fn.
func eachMessage(ctx context.Context, st store.Store, f store.ListFilter, tw *tabwriter.Writer, fn func(store.Info) error) (int, error) {
	left, done := f.Limit, 0
	// The first page assumes the largest payload; later ones, the largest
	// row seen so far.
	largest := store.DefaultPayloadLimit
	for left > 0 {
		f.Limit = min(left, max(1, min(1000, listBudget/max(largest, 1))))
		infos, err := st.List(ctx, f)
		if err != nil {
			return done, err
		}
		largest = 0
		for _, in := range infos {
			if err := fn(in); err != nil {
				return done, err
			}
			largest = max(largest, len(in.Payload)+len(in.LastError)+len(in.Key)+len(in.DedupID))
			f.AfterID = in.ID
		}
		done += len(infos)
		left -= len(infos)
		if tw != nil {
			if err := tw.Flush(); err != nil {
				return done, err
			}
		}
		if len(infos) < f.Limit {
			break
		}
	}
	return done, nil
}

// clip shortens s to n runes for a table cell, escaped by escape.
func clip(s string, n int) string {
	// Only the first n runes can show: escape no more of s than that.
	cut, count := len(s), 0
	for i := range s {
		if count == n {
			cut = i
			break
		}
		count++
	}
	head := escape(s[:cut])
	if r := []rune(head); cut < len(s) || len(r) > n {
		return string(r[:min(len(r), n-1)]) + "…"
	}
	return head
}

// clipBytes is clip for a payload, without copying more of it than shows.
func clipBytes(p []byte, n int) string { return clip(string(p[:min(len(p), 4*(n+1))]), n) }

// escape makes user data safe for a terminal and a table cell: text with
// control characters (tabs and newlines included) or invalid UTF-8 is
// shown with Go's escapes, so that it can neither break the table nor
// drive the terminal; other text is shown as it is.
func escape(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
			q := strconv.Quote(s)
			return q[1 : len(q)-1]
		}
	}
	return s
}

func (a *app) deadCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dead list|redrive|purge --queue Q",
		Short: "List, redrive or purge dead letters",
		Long: `dead works on a queue's dead letters: messages that failed for good (a
permanent error, deliveries used up, an expired last lease). redrive returns
them to pending with a fresh delivery budget; purge deletes them.`,
		Example: `  leasehold dead list --queue emails
  leasehold dead redrive --queue emails
  leasehold dead purge --queue emails --id 17 --id 18
  leasehold dead purge --queue emails --all`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("missing subcommand: dead list, dead redrive or dead purge")
		},
	}
	var queue string
	var ids []int64
	var asJSON, all bool
	sub := func(use, short, example string, act func(cmd *cobra.Command, st store.Store) error) *cobra.Command {
		c := &cobra.Command{Use: use + " --queue Q", Short: short, Args: noArgs, Example: example,
			RunE: func(c *cobra.Command, _ []string) error {
				if err := requireQueue(queue); err != nil {
					return err
				}
				seen := make(map[int64]bool, len(ids))
				for _, id := range ids {
					if id < 1 {
						return usagef("--id %d: must be positive", id)
					}
					if seen[id] {
						return usagef("--id %d: given twice", id)
					}
					seen[id] = true
				}
				if use == "purge" && len(ids) == 0 && !all {
					return usagef("dead purge deletes dead letters for good: name them with --id, or pass --all for every one of the queue's")
				}
				if all && len(ids) > 0 {
					return usagef("--all and --id exclude each other")
				}
				ctx := c.Context()
				open := a.openExisting
				if use == "list" {
					open = a.openRead
				}
				st, err := open(ctx)
				if err != nil {
					return err
				}
				defer st.Close()
				// A queue exists while it holds messages; counting them reads
				// no history.
				s, err := st.Stats(ctx, queue)
				if err != nil {
					return err
				}
				if s.Pending+s.Waiting+s.Processing+s.Completed+s.Dead == 0 {
					return fmt.Errorf("queue %s does not exist", escape(queue))
				}
				return act(c, st)
			}}
		c.Flags().StringVar(&queue, "queue", "", "queue name (required)")
		return c
	}
	list := sub("list", "List dead letters", "  leasehold dead list --queue emails\n  leasehold dead list --queue emails --json", func(c *cobra.Command, st store.Store) error {
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		ids := a.messageIDs(c.Context(), st, queue)
		if !asJSON {
			fmt.Fprintln(tw, "ID\t"+sqsColumn(ids, "SQS MESSAGE ID\t")+"DEAD AT\tREASON\tDELIVERIES\tLAST ERROR\tPAYLOAD")
		}
		enc := json.NewEncoder(a.stdout)
		_, err := eachMessage(c.Context(), st, store.ListFilter{Queue: queue, State: store.Dead, Limit: math.MaxInt}, tw, func(in store.Info) error {
			if asJSON {
				text, b64 := payloadJSON(in.Payload)
				out := map[string]any{"id": in.ID, "queue": in.Queue, "key": in.Key, "reason": in.DeadReason, "deliveries": in.Deliveries,
					"last_error": in.LastError, "dead_at": in.FinishedAt, "payload": text}
				if b64 != "" {
					out["payload_base64"] = b64
				}
				if id := ids.MessageID(in.ID); id != "" {
					out["sqs_message_id"] = id
				}
				return enc.Encode(out)
			}
			_, err := fmt.Fprintf(tw, "%d\t%s%s\t%s\t%d\t%s\t%s\n", in.ID, sqsColumn(ids, ids.MessageID(in.ID)+"\t"), in.FinishedAt.Format(time.RFC3339), escape(string(in.DeadReason)), in.Deliveries,
				clip(in.LastError, 60), clipBytes(in.Payload, 40))
			return err
		})
		return err
	})
	list.Flags().BoolVar(&asJSON, "json", false, "one JSON object per dead letter")
	redrive := sub("redrive", "Return dead letters to pending", "  leasehold dead redrive --queue emails\n  leasehold dead redrive --queue emails --id 17", func(c *cobra.Command, st store.Store) error {
		n, err := st.Redrive(c.Context(), queue, ids)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "redrove %d\n", n)
		return nil
	})
	purge := sub("purge", "Delete dead letters", "  leasehold dead purge --queue emails --id 17 --id 18\n  leasehold dead purge --queue emails --all", func(c *cobra.Command, st store.Store) error {
		n, err := st.Purge(c.Context(), queue, ids)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "purged %d\n", n)
		return nil
	})
	redrive.Flags().Int64SliceVar(&ids, "id", nil, "only these message ids (repeatable); default all of the queue's")
	purge.Flags().Int64SliceVar(&ids, "id", nil, "only these message ids (repeatable)")
	purge.Flags().BoolVar(&all, "all", false, "every dead letter of the queue")
	cmd.AddCommand(list, redrive, purge)
	return cmd
}

func (a *app) reapCommand() *cobra.Command {
	var once bool
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "reap [--once]",
		Short: "Take back messages whose lease expired",
		Long: `reap returns messages whose lease expired to pending, or dead-letters those
whose deliveries are used up. Every worker runs a reaper already; this is
for deployments that want one elsewhere, or a one-off run with --once.`,
		Example: `  leasehold reap --once
  leasehold reap --interval 5s`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if every <= 0 {
				return usagef("--interval %s: must be positive", every)
			}
			ctx := cmd.Context()
			st, err := a.openExisting(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			r, err := maintenance.NewReaper(maintenance.ReaperConfig{Deps: a.deps(st, nil), Interval: every})
			if err != nil {
				return err
			}
			if once {
				rec, err := r.RunOnce(ctx)
				if err != nil {
					return err
				}
				printRecovered(a.stdout, rec)
				return nil
			}
			return a.runUntilSignal(ctx, r)
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "reap once and exit")
	cmd.Flags().DurationVar(&every, "interval", 10*time.Second, "time between runs")
	return cmd
}

func printRecovered(w io.Writer, rec []store.Recovered) {
	dead := 0
	for _, r := range rec {
		if r.Dead {
			dead++
		}
	}
	fmt.Fprintf(w, "recovered %d, dead-lettered %d\n", len(rec)-dead, dead)
}
