package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
)

// enqueueBatch is how many stdin lines go in one enqueue.
const enqueueBatch = 500

func (a *app) enqueueCommand() *cobra.Command {
	var (
		queue, key, dedup, replyTo, kind string
		delay                            time.Duration
		maxDeliveries, priority          int
		raw, nul                         bool
		file                             string
	)
	cmd := &cobra.Command{
		Use:   "enqueue --queue Q [flags] [PAYLOAD]",
		Short: "Put messages on a queue",
		Long: `enqueue puts one message with PAYLOAD on the queue. Without PAYLOAD it reads
standard input: plain, one message per line (line endings are not part of
the payload; a payload cannot hold a newline); with --raw, all of standard
input is one message, byte for byte; with -0, messages are separated by NUL
bytes, so they may hold newlines or any other byte. --file PATH makes the
file's contents one message. Lines and messages are sent in batches. It
prints each message's id on its own line; a duplicate (same --dedup id
within the dedup window) prints the id of the message already enqueued.`,
		Example: `  leasehold enqueue --queue emails '{"to":"ann@example.com"}'
  leasehold enqueue --queue invoices --key customer-42 'invoice 7'
  leasehold enqueue --queue emails --priority 10 'urgent'
  seq 1 1000 | leasehold enqueue --queue numbers
  leasehold enqueue --queue images --file photo.png
  gzip -c report.csv | leasehold enqueue --queue reports --raw
  find . -name '*.log' -print0 | leasehold enqueue --queue logs -0`,
		Args: maxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireQueue(queue); err != nil {
				return err
			}
			if delay < 0 {
				return usagef("--delay %s: must not be negative", delay)
			}
			if maxDeliveries < 0 || maxDeliveries > store.MaxDeliveriesLimit {
				return usagef("--max-deliveries %d: must be 1 to %d", maxDeliveries, store.MaxDeliveriesLimit)
			}
			if cmd.Flags().Changed("max-deliveries") && maxDeliveries == 0 {
				return usagef("--max-deliveries 0: must be at least 1")
			}
			if replyTo != "" {
				if err := storecore.CheckQueue(replyTo); err != nil {
					return usagef("--reply-to: %v", err)
				}
			}
			base := store.NewMessage{Queue: queue, Key: key, DedupID: dedup, Delay: delay, MaxDeliveries: maxDeliveries, ReplyTo: replyTo, Kind: kind,
				Priority: priority}
			sources := 0
			for _, set := range []bool{len(args) == 1, raw, nul, file != ""} {
				if set {
					sources++
				}
			}
			if sources > 1 {
				return usagef("PAYLOAD, --raw, -0 and --file each name the messages: give one of them")
			}
			var payloads [][]byte
			var err error
			switch {
			case len(args) == 1:
				payloads = [][]byte{[]byte(args[0])}
			case file != "":
				var p []byte
				if p, err = readPayloadFile(file); err != nil {
					return err
				}
				payloads = [][]byte{p}
			case raw:
				var p []byte
				if p, err = readAll(a.stdin, "standard input"); err != nil {
					return err
				}
				payloads = [][]byte{p}
			default:
				if payloads, err = readMessages(a.stdin, nul); err != nil {
					return err
				}
				if dedup != "" && len(payloads) > 1 {
					return usagef("--dedup names one message, but standard input has %d", len(payloads))
				}
			}
			msgs := make([]store.NewMessage, len(payloads))
			for i, p := range payloads {
				msgs[i] = base
				msgs[i].Payload = p
			}
			// Check everything before writing anything.
			for start := 0; start < len(msgs); start += enqueueBatch {
				if _, err := storecore.CheckNewMessages(msgs[start:min(start+enqueueBatch, len(msgs))], store.Options{}.WithDefaults()); err != nil {
					return usagef("messages %d to %d: %v", start+1, min(start+enqueueBatch, len(msgs)), err)
				}
			}
			ctx := cmd.Context()
			st, err := a.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			out := bufio.NewWriter(a.stdout)
			defer out.Flush()
			for start := 0; start < len(msgs); start += enqueueBatch {
				batch := msgs[start:min(start+enqueueBatch, len(msgs))]
				res, err := st.Enqueue(ctx, batch)
				if err != nil {
					out.Flush()
					return fmt.Errorf("enqueue after %d of %d messages: %w", start, len(msgs), err)
				}
				for _, r := range res {
					fmt.Fprintln(out, r.ID)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&queue, "queue", "", "queue name (required)")
	f.StringVar(&key, "key", "", "ordering key: messages with the same key run one at a time, in order")
	f.StringVar(&dedup, "dedup", "", "dedup id: a second message with this id within the dedup window is not enqueued")
	f.DurationVar(&delay, "delay", 0, "keep the message invisible for this long")
	f.IntVar(&maxDeliveries, "max-deliveries", 0, "deliveries before the message is dead-lettered (default 5)")
	f.StringVar(&replyTo, "reply-to", "", "queue that receives the worker's reply")
	f.StringVar(&kind, "kind", "", "the kind of job, for a client that dispatches by it")
	f.IntVar(&priority, "priority", 0, fmt.Sprintf("higher runs first: %d to %d", store.MinPriority, store.MaxPriority))
	f.BoolVar(&raw, "raw", false, "all of standard input is one message, byte for byte")
	f.BoolVarP(&nul, "null", "0", false, "standard input holds messages ended by NUL bytes, not lines")
	f.StringVar(&file, "file", "", "the contents of this file are one message")
	return cmd
}

// readLines reads every line of r, without line endings. A line longer
// than the payload limit is an error naming its number.
func readLines(r io.Reader) ([][]byte, error) { return readMessages(r, false) }

// readMessages reads every message of r: lines without their endings, or,
// when nul is set, runs of bytes each ended by a NUL (the last may lack
// it). A message longer than the payload limit is an error naming its
// number.
func readMessages(r io.Reader, nul bool) ([][]byte, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), store.DefaultPayloadLimit+2)
	what := "line"
	if nul {
		what = "message"
		sc.Split(scanNul)
	}
	var out [][]byte
	for sc.Scan() {
		out = append(out, bytes.Clone(sc.Bytes())) // ScanLines drops a CR before the newline
	}
	if err := sc.Err(); err != nil {
		if err == bufio.ErrTooLong {
			return nil, usagef("standard input %s %d is longer than the payload limit of %d bytes", what, len(out)+1, store.DefaultPayloadLimit)
		}
		return nil, fmt.Errorf("read standard input: %w", err)
	}
	return out, nil
}

// scanNul splits input at NUL bytes.
func scanNul(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// readAll reads r whole as one payload, refusing more than the payload
// limit without reading further.
func readAll(r io.Reader, name string) ([]byte, error) {
	p, err := io.ReadAll(io.LimitReader(r, store.DefaultPayloadLimit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(p) > store.DefaultPayloadLimit {
		return nil, usagef("%s is longer than the payload limit of %d bytes", name, store.DefaultPayloadLimit)
	}
	return p, nil
}

// readPayloadFile reads a --file payload.
func readPayloadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("--file: %v", err)
	}
	defer f.Close()
	return readAll(f, "--file "+path)
}
