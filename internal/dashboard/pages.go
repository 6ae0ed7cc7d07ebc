package dashboard

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/leasehold/leasehold/internal/jobmeta"
	"github.com/leasehold/leasehold/store"
)

// view is what a page's template gets.
type view struct {
	Title string
	CSRF  string
	// Flash says what the last action did.
	Flash string
	// SignedIn shows the sign-out button: the dashboard has a password
	// and the browser a session.
	SignedIn bool
	// Crumbs lead from the queues page to this one.
	Crumbs []crumb
	// Queue is the queue the page is of, which the search box searches
	// by default; empty for none.
	Queue string
	// Find is the search box's text: what the search page looked for.
	Find string
	// Bare leaves the search box out: the sign-in page.
	Bare bool
	Data any
}

type crumb struct{ Name, URL string }

// handler makes a page: the template to render and its data, or an error.
type handler func(w http.ResponseWriter, r *http.Request, v *view) (string, error)

// page renders a page, or its error: bad input is 400 and names the
// problem, a missing queue or message 404, anything else 500.
func (d *Dashboard) page(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := &view{CSRF: d.csrfToken(w, r), Flash: d.flash(r), SignedIn: d.cfg.Password != ""}
		name, err := h(w, r, v)
		if errors.Is(err, errRedirected) {
			return
		}
		if err != nil {
			d.fail(w, r, v, err)
			return
		}
		d.render(w, http.StatusOK, name, v)
	}
}

func (d *Dashboard) render(w http.ResponseWriter, status int, name string, v *view) {
	var b bytes.Buffer
	if err := d.pages[name].ExecuteTemplate(&b, "layout", v); err != nil {
		d.log.Error("dashboard: render", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// flash is what the last action did, as the redirect after it says,
// signed so that a link from elsewhere cannot make the page say it.
func (d *Dashboard) flash(r *http.Request) string {
	q := r.URL.Query()
	done := q.Get("done")
	if done == "" || !hmac.Equal([]byte(q.Get("sig")), []byte(sign(d.flashKey, done))) {
		return ""
	}
	return done
}

// badRequest is input the dashboard refuses.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

func bad(format string, args ...any) error { return badRequest{fmt.Sprintf(format, args...)} }

// missing is a queue or message that does not exist; its text names it.
type missing struct{ msg string }

func (e missing) Error() string { return e.msg }
func (e missing) Unwrap() error { return store.ErrNotFound }

func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, v *view, err error) {
	status := http.StatusInternalServerError
	text := ""
	var br badRequest
	switch {
	case errors.As(err, &br) || errors.Is(err, store.ErrInvalid):
		status, text = http.StatusBadRequest, err.Error()
	case errors.Is(err, store.ErrNotFound):
		status, text = http.StatusNotFound, err.Error()
	default:
		text = d.serverFailed(r, err)
	}
	v.Title = http.StatusText(status)
	v.Data = text
	d.render(w, status, "error", v)
}

// serverFailed logs a failure of the server's own under a new reference
// and returns what the client is told: the reference, never the detail,
// which may name the database, its files or its statements.
func (d *Dashboard) serverFailed(r *http.Request, err error) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	ref := hex.EncodeToString(b[:])
	d.log.Error("dashboard: request failed", "ref", ref, "method", r.Method, "path", r.URL.Path, "error", err)
	return "the server could not answer; its log has the detail under reference " + ref
}

// write wraps an action: it checks the CSRF token, runs the action and
// sends the browser back to where the form said, with what it did.
func (d *Dashboard) write(act func(r *http.Request) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := &view{CSRF: d.csrfToken(w, r)}
		if !d.checkCSRF(r) {
			v.Title, v.Data = "Forbidden", "the form's CSRF token is missing or stale: reload the page and try again"
			d.render(w, http.StatusForbidden, "error", v)
			return
		}
		done, err := act(r)
		if err != nil {
			d.fail(w, r, v, err)
			return
		}
		u, err := url.Parse(localPath(r.PostFormValue("back"), "/"))
		if err != nil {
			u = &url.URL{Path: "/"}
		}
		q := u.Query()
		q.Set("done", done)
		q.Set("sig", sign(d.flashKey, done))
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
	}
}

// queueURL is a queue's page. The name is one escaped path segment, so
// that a name with a slash or a percent sign stays whole; a name of dots
// alone gets two more dots, since "." and ".." are path segments that
// clients and servers remove, and queueName takes them off again.
func queueURL(q string) string {
	if strings.Trim(q, ".") == "" {
		q = ".." + q
	}
	return "/queues/" + url.PathEscape(q)
}

// queueName is the queue a request's path names: queueURL undone.
func queueName(r *http.Request) string {
	q := r.PathValue("queue")
	if len(q) > 2 && strings.Trim(q, ".") == "" {
		q = q[2:]
	}
	return q
}

func messageURL(q string, id int64) string {
	return queueURL(q) + "/messages/" + strconv.FormatInt(id, 10)
}

// --- the queues page ---

// queuesPageSize is how many queues a page of the queues page, or of
// its JSON, shows.
const queuesPageSize = 50

type queueRow struct {
	Name   string
	URL    string
	Stats  store.Stats
	Oldest string
	Chart  chart
}

type queuesData struct {
	Rows  []queueRow
	Pages pages
	// Live is the JSON of this page's queues, for its live update.
	Live string
}

// queueRows counts one page of queues, by name: the page after the
// request's after= name, or the one before its before= name, or the
// first. Only the page's queues are read: their names from the store's
// page of queues, then their counts.
func (d *Dashboard) queueRows(r *http.Request) (queuesData, error) {
	q := r.URL.Query()
	after, before := q.Get("after"), q.Get("before")
	if before != "" {
		after = ""
	}
	// One more than a page says whether there is more beyond it.
	names, err := d.st.QueuePage(r.Context(), after, before, queuesPageSize+1)
	if err != nil {
		return queuesData{}, err
	}
	more := len(names) > queuesPageSize
	if more && before != "" {
		names = names[1:]
	} else if more {
		names = names[:queuesPageSize]
	}
	data := queuesData{Rows: make([]queueRow, 0, len(names))}
	for _, n := range names {
		st, err := d.st.Stats(r.Context(), n)
		if err != nil {
			return queuesData{}, err
		}
		c, err := d.throughput(r.Context(), n, 120, 24, lastHour)
		if err != nil {
			return queuesData{}, err
		}
		data.Rows = append(data.Rows, queueRow{Name: n, URL: queueURL(n), Stats: st, Oldest: age(st.OldestPendingAge), Chart: c[0]})
	}
	link := func(key, name string) string { return "/?" + url.Values{key: {name}}.Encode() }
	// The live update asks for this page as this request did.
	data.Live = "/api/queues"
	switch {
	case before != "":
		data.Live += "?" + url.Values{"before": {before}}.Encode()
	case after != "":
		data.Live += "?" + url.Values{"after": {after}}.Encode()
	}
	if after != "" || before != "" {
		data.Pages.First = "/"
	}
	if len(names) > 0 {
		if after != "" || before != "" && more {
			data.Pages.Previous = link("before", names[0])
		}
		if before != "" || more {
			data.Pages.Next = link("after", names[len(names)-1])
		}
	} else if after != "" {
		// The queues past this point went since the link was made: the
		// page before it may still hold some.
		data.Pages.Previous = link("before", after)
	}
	return data, nil
}

func (d *Dashboard) queuesPage(w http.ResponseWriter, r *http.Request, v *view) (string, error) {
	data, err := d.queueRows(r)
	if err != nil {
		return "", err
	}
	v.Title, v.Data = "Queues", data
	return "queues", nil
}

// apiQueues is the queues page's counts as JSON, for its live update: a
// page of queues at a time, chosen as the page is (after= or before= a
// name).
func (d *Dashboard) apiQueues(w http.ResponseWriter, r *http.Request) {
	data, err := d.queueRows(r)
	if err != nil {
		http.Error(w, d.serverFailed(r, err), http.StatusInternalServerError)
		return
	}
	type row struct {
		Name                                                              string
		Paused                                                            bool
		Pending, Delayed, Waiting, Processing, Completed, Dead, Cancelled int64
		Oldest                                                            string
		Chart                                                             chart
	}
	out := make([]row, len(data.Rows))
	for i, q := range data.Rows {
		s := q.Stats
		out[i] = row{q.Name, s.Paused, s.Pending, s.Delayed, s.Waiting, s.Processing, s.Completed, s.Dead, s.Cancelled, q.Oldest, q.Chart}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}

// --- a queue's messages ---

type messageRow struct {
	store.Info
	URL          string
	StateName    string
	LeaseExpires string
	Error        string
	// SQSID is the message's id in the SQS API.
	SQSID string
}

func (d *Dashboard) row(in store.Info) messageRow {
	m := messageRow{Info: in, URL: messageURL(in.Queue, in.ID), StateName: in.State.String(), Error: truncate(in.LastError, 80),
		SQSID: d.cfg.MessageIDs.MessageID(in.ID)}
	if in.State == store.Processing {
		m.LeaseExpires = d.until(in.LeaseExpires)
	}
	return m
}

type queueData struct {
	Name, URL string
	Stats     store.Stats
	// Charts are the queue's throughput over the last hour and day.
	Charts           []chart
	State, Key, Kind string
	States           []string
	Messages         []messageRow
	Pages            pages
}

var listStates = []store.State{store.Pending, store.Waiting, store.Processing, store.Completed, store.Dead, store.Cancelled}

func (d *Dashboard) queuePage(w http.ResponseWriter, r *http.Request, v *view) (string, error) {
	name := queueName(r)
	q := r.URL.Query()
	if id := strings.TrimSpace(q.Get("id")); id != "" {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || n <= 0 {
			return "", bad("message id %q is not a positive whole number", id)
		}
		http.Redirect(w, r, messageURL(name, n), http.StatusSeeOther)
		return "", errRedirected
	}
	st, err := d.st.Stats(r.Context(), name)
	if err != nil {
		return "", err
	}
	data := queueData{Name: name, URL: queueURL(name), Stats: st, State: q.Get("state"), Key: q.Get("key"), Kind: q.Get("kind")}
	if data.Charts, err = d.throughput(r.Context(), name, 600, 80, lastHour, lastDay); err != nil {
		return "", err
	}
	if data.State == "" {
		data.State = "pending"
	}
	state, err := store.ParseState(data.State)
	if err != nil {
		return "", err
	}
	infos, pages, err := d.listPage(r, data.URL, store.ListFilter{Queue: name, State: state, Key: data.Key, Kind: data.Kind})
	if err != nil {
		return "", err
	}
	for _, s := range listStates {
		data.States = append(data.States, s.String())
	}
	for _, in := range infos {
		data.Messages = append(data.Messages, d.row(in))
	}
	data.Pages = pages
	v.Title, v.Data, v.Queue = "Queue "+name, data, name
	v.Crumbs = []crumb{{"Queues", "/"}}
	return "queue", nil
}

// errRedirected ends a page that redirected instead.
var errRedirected = errors.New("redirected")

// pages are the links around a page of a listing by id; empty where
// there is no such page.
type pages struct{ First, Previous, Next string }

// listPage lists one page of f, in ascending ids: the page after the
// request's after= id, or the one before its before= id, or the first.
func (d *Dashboard) listPage(r *http.Request, base string, f store.ListFilter) ([]store.Info, pages, error) {
	q := r.URL.Query()
	after, err := pageID(q.Get("after"))
	if err != nil {
		return nil, pages{}, err
	}
	before, err := pageID(q.Get("before"))
	if err != nil {
		return nil, pages{}, err
	}
	// One more than a page says whether there is more beyond it.
	f.AfterID, f.BeforeID, f.Limit = after, before, pageSize+1
	infos, err := d.st.List(r.Context(), f)
	if err != nil {
		return nil, pages{}, err
	}
	more := len(infos) > pageSize
	infos = infos[:min(len(infos), pageSize)]
	if before > 0 {
		slices.Reverse(infos) // a listing before an id comes newest first
	}
	var p pages
	link := func(key string, id int64) string {
		v := cloneValues(q)
		v.Del("after")
		v.Del("before")
		v.Del("done")
		v.Del("sig")
		if key != "" {
			v.Set(key, strconv.FormatInt(id, 10))
		}
		return base + "?" + v.Encode()
	}
	if after > 0 || before > 0 {
		p.First = link("", 0)
	}
	switch {
	case len(infos) > 0:
		if after > 0 || before > 0 && more {
			p.Previous = link("before", infos[0].ID)
		}
		if before > 0 || more {
			p.Next = link("after", infos[len(infos)-1].ID)
		}
	case after > 0:
		// The rows past this point went since the link was made: the
		// page before it may still hold some.
		p.Previous = link("before", after+1)
	}
	return infos, p, nil
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = slices.Clone(v)
	}
	return out
}

func pageID(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, bad("page position %q is not a whole number", s)
	}
	return n, nil
}

// --- one message ---

type messageData struct {
	Info         messageRow
	QueueURL     string
	Payload      payloadView
	Attributes   payloadView
	EnqueuedAt   string
	VisibleAt    string
	FinishedAt   string
	FirstClaimed string
	Actions      []string
	// Errors are the message's error history, newest first, of which
	// the store keeps ErrorsKept.
	Errors     []attemptError
	ErrorsKept int
	// RunsIn says when a delayed message runs: "runs in 4m 10s"; empty
	// for any other.
	RunsIn string
	// Metadata is the job metadata a client keeps in the attributes,
	// sorted by key; TraceID the trace its traceparent names, if any.
	Metadata []metadataEntry
	TraceID  string
}

type metadataEntry struct{ Key, Value string }

// attemptError is a row of a message's error history.
type attemptError struct {
	Attempt int
	At      string
	Worker  string
	Error   string
}

func (d *Dashboard) messagePage(w http.ResponseWriter, r *http.Request, v *view) (string, error) {
	name := queueName(r)
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return "", bad("message id %q is not a positive whole number", r.PathValue("id"))
	}
	in, err := d.st.Get(r.Context(), id)
	if err != nil {
		return "", err
	}
	if in.Queue != name {
		return "", fmt.Errorf("%w: message %d is not in queue %s", store.ErrNotFound, id, name)
	}
	data := messageData{Info: d.row(in), QueueURL: queueURL(name), Payload: showPayload(in.Payload),
		EnqueuedAt: stamp(in.EnqueuedAt), VisibleAt: stamp(in.VisibleAt), FinishedAt: stamp(in.FinishedAt), FirstClaimed: stamp(in.FirstClaimedAt)}
	if len(in.Attributes) > 0 {
		data.Attributes = showPayload(in.Attributes)
	}
	if in.State == store.Pending && in.VisibleAt.After(d.clk.Now()) {
		data.RunsIn = "runs in " + spell(in.VisibleAt.Sub(d.clk.Now()))
	}
	meta := jobmeta.Decode(in.Attributes)
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		data.Metadata = append(data.Metadata, metadataEntry{k, meta[k]})
	}
	data.TraceID = traceID(meta["traceparent"])
	data.ErrorsKept = store.MaxErrors
	for i := len(in.Errors) - 1; i >= 0; i-- {
		e := in.Errors[i]
		data.Errors = append(data.Errors, attemptError{Attempt: e.Attempt, At: stamp(e.At), Worker: e.WorkerID, Error: e.Error})
	}
	switch in.State {
	case store.Dead:
		data.Actions = []string{"redrive", "purge"}
	case store.Pending, store.Waiting, store.Processing:
		data.Actions = []string{"cancel"}
	}
	v.Title, v.Data, v.Queue = fmt.Sprintf("Message %d", id), data, name
	v.Crumbs = []crumb{{"Queues", "/"}, {name, queueURL(name)}}
	return "message", nil
}

// traceID is the trace id of a W3C traceparent ("00-<trace id>-<span
// id>-<flags>"), as the OpenTelemetry middleware writes it into a job's
// metadata; empty when it is not one.
func traceID(traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) < 4 || len(parts[0]) != 2 || len(parts[1]) != 32 || strings.Trim(parts[1], "0") == "" {
		return ""
	}
	if _, err := hex.DecodeString(parts[1]); err != nil {
		return ""
	}
	return parts[1]
}

// payloadView shows bytes as text, as indented JSON, or in hex.
type payloadView struct {
	Format string
	Text   string
	Size   int
	Cut    bool
}

// maxShown bounds how much of a payload a page shows.
const maxShown = 64 << 10

func showPayload(b []byte) payloadView {
	p := payloadView{Size: len(b)}
	if len(b) > maxShown {
		b, p.Cut = b[:maxShown], true
	}
	var out bytes.Buffer
	switch {
	case !p.Cut && json.Valid(b) && json.Indent(&out, b, "", "  ") == nil:
		p.Format, p.Text = "JSON", out.String()
	case utf8.Valid(b) && printable(b):
		p.Format, p.Text = "text", string(b)
	default:
		p.Format, p.Text = "hex", hexDump(b)
	}
	return p
}

func printable(b []byte) bool {
	for _, r := range string(b) {
		if r < 0x20 && r != '\n' && r != '\r' && r != '\t' || r == 0x7f {
			return false
		}
	}
	return true
}

func hexDump(b []byte) string {
	var out strings.Builder
	for i := 0; i < len(b); i += 16 {
		line := b[i:min(i+16, len(b))]
		fmt.Fprintf(&out, "%08x  % x\n", i, line)
	}
	return out.String()
}

// --- keys ---

type keyRow struct {
	store.BlockedKey
	HeadURL   string
	HeadState string
	HeadWhen  string
	Error     string
}

type keysData struct {
	Name, URL string
	Keys      []keyRow
	Next      string
}

func (d *Dashboard) keysPage(w http.ResponseWriter, r *http.Request, v *view) (string, error) {
	name := queueName(r)
	after := r.URL.Query().Get("after")
	keys, err := d.st.BlockedKeys(r.Context(), name, after, pageSize)
	if err != nil {
		return "", err
	}
	data := keysData{Name: name, URL: queueURL(name)}
	for _, k := range keys {
		row := keyRow{BlockedKey: k}
		if k.Head.ID != 0 {
			row.HeadURL = messageURL(name, k.Head.ID)
			row.HeadState = k.Head.State.String()
			row.Error = truncate(k.Head.LastError, 80)
			if k.Head.State == store.Processing {
				row.HeadWhen = "lease ends " + d.until(k.Head.LeaseExpires)
			} else if k.Head.VisibleAt.After(d.clk.Now()) {
				row.HeadWhen = "visible " + d.until(k.Head.VisibleAt)
			}
		}
		data.Keys = append(data.Keys, row)
	}
	if len(keys) == pageSize {
		data.Next = data.URL + "/keys?after=" + url.QueryEscape(keys[len(keys)-1].Key)
	}
	v.Title, v.Data, v.Queue = "Keys of "+name, data, name
	v.Crumbs = []crumb{{"Queues", "/"}, {name, queueURL(name)}}
	return "keys", nil
}

// --- dead letters ---

var reasons = []store.DeadReason{store.ReasonMaxDeliveries, store.ReasonLeaseExpired, store.ReasonPermanent, store.ReasonMaxProcessingTime}

type deadData struct {
	Name, URL string
	Reason    string
	Reasons   []string
	Messages  []messageRow
	Pages     pages
	Back      string
}

func (d *Dashboard) deadPage(w http.ResponseWriter, r *http.Request, v *view) (string, error) {
	name := queueName(r)
	q := r.URL.Query()
	data := deadData{Name: name, URL: queueURL(name), Reason: q.Get("reason")}
	for _, rs := range reasons {
		data.Reasons = append(data.Reasons, string(rs))
	}
	if data.Reason != "" && !slices.Contains(data.Reasons, data.Reason) {
		return "", bad("unknown dead reason %q", data.Reason)
	}
	infos, pages, err := d.listPage(r, data.URL+"/dead", store.ListFilter{Queue: name, State: store.Dead, Reason: store.DeadReason(data.Reason)})
	if err != nil {
		return "", err
	}
	for _, in := range infos {
		data.Messages = append(data.Messages, d.row(in))
	}
	data.Pages = pages
	data.Back = r.URL.RequestURI()
	v.Title, v.Data, v.Queue = "Dead letters of "+name, data, name
	v.Crumbs = []crumb{{"Queues", "/"}, {name, queueURL(name)}}
	return "dead", nil
}

// --- actions ---

// actions are what the confirmation page can apply, and how each is said.
var actions = map[string]string{"redrive": "Redrive", "purge": "Purge", "cancel": "Cancel"}

type confirmData struct {
	Name, URL string
	Action    string
	Verb      string
	IDs       []int64
	Back      string
}

// formIDs reads the ids a form selected: at least one, at most a page.
func formIDs(r *http.Request) ([]int64, error) {
	if err := r.ParseForm(); err != nil {
		return nil, bad("the form cannot be read: %v", err)
	}
	var ids []int64
	for _, s := range r.PostForm["id"] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return nil, bad("message id %q is not a positive whole number", s)
		}
		ids = append(ids, n)
	}
	if len(ids) == 0 {
		return nil, bad("no message was selected")
	}
	if len(ids) > store.MaxBatch {
		return nil, bad("%d messages were selected; at most %d at once", len(ids), store.MaxBatch)
	}
	return ids, nil
}

// formSelection reads a form's ids and the action to take on them.
func formSelection(r *http.Request) ([]int64, string, error) {
	ids, err := formIDs(r)
	if err != nil {
		return nil, "", err
	}
	a := r.PostFormValue("action")
	if _, ok := actions[a]; !ok {
		return nil, "", bad("unknown action %q: want redrive, purge or cancel", a)
	}
	return ids, a, nil
}

// localPath is back when it is a path on this server, else fallback: a
// form cannot send the browser elsewhere. A browser drops tabs and line
// breaks from a URL and reads a backslash as a slash, so "/\t/evil.example"
// would be "//evil.example" to it: any of them falls back too.
func localPath(back, fallback string) string {
	if !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") ||
		strings.ContainsFunc(back, func(r rune) bool { return r == '\\' || unicode.IsControl(r) }) {
		return fallback
	}
	return back
}

// confirmPage asks before an action on messages is applied.
func (d *Dashboard) confirmPage(w http.ResponseWriter, r *http.Request, v *view) (string, error) {
	if !d.checkCSRF(r) {
		return "", bad("the form's CSRF token is missing or stale: reload the page and try again")
	}
	name := queueName(r)
	ids, act, err := formSelection(r)
	if err != nil {
		return "", err
	}
	back := localPath(r.PostFormValue("back"), queueURL(name))
	v.Title = fmt.Sprintf("%s %d message(s)?", actions[act], len(ids))
	v.Data = confirmData{Name: name, URL: queueURL(name), Action: act, Verb: actions[act], IDs: ids, Back: back}
	v.Crumbs = []crumb{{"Queues", "/"}, {name, queueURL(name)}}
	return "confirm", nil
}

func (d *Dashboard) apply(r *http.Request) (string, error) {
	name := queueName(r)
	ids, act, err := formSelection(r)
	if err != nil {
		return "", err
	}
	ctx := r.Context()
	var n int
	switch act {
	case "redrive":
		n, err = d.st.Redrive(ctx, name, ids)
	case "purge":
		n, err = d.st.Purge(ctx, name, ids)
	case "cancel":
		var done []int64
		done, err = d.st.Cancel(ctx, name, ids)
		n = len(done)
	}
	if err != nil {
		return "", err
	}
	past := map[string]string{"redrive": "redrove", "purge": "purged", "cancel": "cancelled"}[act]
	return fmt.Sprintf("%s %d of %d message(s) in %s", past, n, len(ids), name), nil
}

// pause pauses a queue that exists: one that holds messages, has a
// record or is paused. A pause of any other name would make a queue, one
// that no bound on queues counts as it is made.
func (d *Dashboard) pause(r *http.Request) (string, error) {
	name := queueName(r)
	ctx := r.Context()
	st, err := d.st.Stats(ctx, name)
	if err != nil {
		return "", err
	}
	if st == (store.Stats{Queue: name}) {
		if _, err := d.st.QueueInfo(ctx, name); errors.Is(err, store.ErrNotFound) {
			return "", missing{fmt.Sprintf("queue %q does not exist: it has no messages and no record, so there is nothing to pause", name)}
		} else if err != nil {
			return "", err
		}
	}
	if err := d.st.Pause(ctx, name); err != nil {
		return "", err
	}
	return "paused " + name, nil
}

func (d *Dashboard) resume(r *http.Request) (string, error) {
	name := queueName(r)
	if err := d.st.Resume(r.Context(), name); err != nil {
		return "", err
	}
	return "resumed " + name, nil
}

// --- formatting ---

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

func age(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	return d.Round(time.Second).String()
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// until says when t comes, from now.
func (d *Dashboard) until(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	left := t.Sub(d.clk.Now()).Round(time.Second)
	if left < 0 {
		return "ended " + (-left).String() + " ago"
	}
	return "in " + left.String()
}

// pauseArgs are the pause or resume form's.
type pauseArgs struct {
	Name, URL string
	Paused    bool
	CSRF      string
	Back      string
}

// parsePages parses each page with the layout.
func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{"lower": strings.ToLower, "pauseArgs": func(name, url string, paused bool, csrf, back string) pauseArgs {
		return pauseArgs{name, url, paused, csrf, back}
	}}
	out := map[string]*template.Template{}
	for _, name := range []string{"queues", "queue", "message", "keys", "dead", "confirm", "error", "login", "scheduled", "search"} {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}
