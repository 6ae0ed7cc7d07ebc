package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/store"
)

// --- scheduled messages ---

type scheduledRow struct {
	messageRow
	// RunsIn and RunsAt say when the message becomes visible.
	RunsIn, RunsAt string
}

type scheduledData struct {
	Name, URL string
	Delayed   int64
	Messages  []scheduledRow
	Pages     pages
}

// scheduledPage lists a queue's delayed messages, those that run soonest
// first, a page at a time: the page after the message the request's
// after= (an id) and at= (its visible time, in Unix nanoseconds) name.
func (d *Dashboard) scheduledPage(w http.ResponseWriter, r *http.Request, v *view) (string, error) {
	name := queueName(r)
	q := r.URL.Query()
	var after store.ScheduledAfter
	if s := q.Get("after"); s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return "", bad("page position %q is not a positive whole number", s)
		}
		at, err := strconv.ParseInt(q.Get("at"), 10, 64)
		if err != nil {
			return "", bad("page time %q is not a whole number of nanoseconds", q.Get("at"))
		}
		after = store.ScheduledAfter{VisibleAt: time.Unix(0, at).UTC(), ID: id}
	}
	st, err := d.st.Stats(r.Context(), name)
	if err != nil {
		return "", err
	}
	infos, err := d.st.Scheduled(r.Context(), name, after, pageSize+1)
	if err != nil {
		return "", err
	}
	data := scheduledData{Name: name, URL: queueURL(name), Delayed: st.Delayed}
	base := data.URL + "/scheduled"
	if after.ID > 0 {
		data.Pages.First = base
	}
	if len(infos) > pageSize {
		infos = infos[:pageSize]
		last := infos[len(infos)-1]
		data.Pages.Next = base + "?" + url.Values{"after": {strconv.FormatInt(last.ID, 10)},
			"at": {strconv.FormatInt(last.VisibleAt.UnixNano(), 10)}}.Encode()
	}
	now := d.clk.Now()
	for _, in := range infos {
		data.Messages = append(data.Messages, scheduledRow{messageRow: d.row(in), RunsIn: "runs in " + spell(in.VisibleAt.Sub(now)), RunsAt: stamp(in.VisibleAt)})
	}
	v.Title, v.Data, v.Queue = "Scheduled messages of "+name, data, name
	v.Crumbs = []crumb{{"Queues", "/"}, {name, queueURL(name)}}
	return "scheduled", nil
}

// spell says a duration to the second the way people write it: "4m 10s",
// "2h 0m 5s", "1d 3h 0m 0s"; under a second, "under a second".
func spell(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Second {
		return "under a second"
	}
	days, d := d/(24*time.Hour), d%(24*time.Hour)
	h, d := d/time.Hour, d%time.Hour
	m, s := d/time.Minute, (d%time.Minute)/time.Second
	var parts []string
	if days > 0 {
		parts = append(parts, fmt.Sprintf("%dd", days))
	}
	if days > 0 || h > 0 {
		parts = append(parts, fmt.Sprintf("%dh", h))
	}
	if days > 0 || h > 0 || m > 0 {
		parts = append(parts, fmt.Sprintf("%dm", m))
	}
	return strings.Join(append(parts, fmt.Sprintf("%ds", s)), " ")
}

// --- search ---

// searchLimit is how many messages of each state a search by kind or key
// shows.
const searchLimit = 20

// searchQueues is how many queues a search by kind or key without a
// queue named reads at most: each is a few index reads per state.
const searchQueues = 20

type searchRow struct {
	messageRow
	// Matched says what the text matched: the id, the key or the kind.
	Matched string
}

type searchData struct {
	Find, Queue string
	// ByID says the text was an id, looked up in every queue.
	ByID bool
	// NeedsQueue says that kinds and keys were not looked up: no queue
	// was named, and there are more than searchQueues.
	NeedsQueue bool
	// Every is how many queues kinds and keys were looked up in when no
	// queue was named; zero when one was.
	Every int
	// Results are the messages found: by id first, then by key, then
	// by kind, each by state and id.
	Results []searchRow
	// Limit is how many of each state a kind or key shows.
	Limit int
}

// searchPage finds messages: by id in every queue, when the text is a
// whole number, and by key and by kind in the queue named (each state's
// first searchLimit, through the state's index, as a listing reads them).
// Kinds and keys are indexed by queue: with no queue named they are
// looked up in every queue while there are at most searchQueues, and not
// at all beyond.
func (d *Dashboard) searchPage(w http.ResponseWriter, r *http.Request, v *view) (string, error) {
	q := r.URL.Query()
	find, queue := strings.TrimSpace(q.Get("q")), q.Get("queue")
	v.Find, v.Queue = find, queue
	if find == "" {
		return "", bad("nothing to find: type a message id, a kind or a key")
	}
	if len(find) > store.MaxNameLength {
		return "", bad("the text to find is %d bytes; ids, kinds and keys are at most %d", len(find), store.MaxNameLength)
	}
	data := searchData{Find: find, Queue: queue, Limit: searchLimit}
	seen := map[int64]bool{}
	add := func(in store.Info, matched string) {
		if !seen[in.ID] {
			seen[in.ID] = true
			data.Results = append(data.Results, searchRow{messageRow: d.row(in), Matched: matched})
		}
	}
	if id, err := strconv.ParseInt(find, 10, 64); err == nil && id > 0 {
		data.ByID = true
		in, err := d.st.Get(r.Context(), id)
		switch {
		case err == nil:
			add(in, "id")
		case !errors.Is(err, store.ErrNotFound):
			return "", err
		}
	}
	queues := []string{queue}
	if queue == "" {
		// Kinds and keys are indexed by queue: without one named, each
		// queue is read, as long as there are few.
		all, err := d.st.QueuePage(r.Context(), "", "", searchQueues+1)
		if err != nil {
			return "", err
		}
		if queues = all; len(all) > searchQueues {
			queues, data.NeedsQueue = nil, true
		}
		data.Every = len(queues)
	}
	for _, by := range []string{"key", "kind"} {
		for _, q := range queues {
			for _, s := range listStates {
				f := store.ListFilter{Queue: q, State: s, Limit: searchLimit}
				if by == "key" {
					f.Key = find
				} else {
					f.Kind = find
				}
				infos, err := d.st.List(r.Context(), f)
				if err != nil {
					return "", err
				}
				for _, in := range infos {
					add(in, by)
				}
			}
		}
	}
	v.Title, v.Data = "Find "+find, data
	v.Crumbs = []crumb{{"Queues", "/"}}
	return "search", nil
}
