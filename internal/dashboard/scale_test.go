package dashboard_test

import (
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/store"
)

var queueRowLink = regexp.MustCompile(`<th scope="row"><a href="([^"]+)">([^<]*)</a></th>`)

// queueLinks are the queues a queues page lists, by name, and the links
// to their pages.
func queueLinks(page string) (names, links []string) {
	for _, m := range queueRowLink.FindAllStringSubmatch(page, -1) {
		links = append(links, html.UnescapeString(m[1]))
		names = append(names, html.UnescapeString(m[2]))
	}
	return names, links
}

// The queues page shows a page of queues at a time, by name, and pages
// forward and back through all of them; its JSON is paged the same way.
func TestQueuesPagePages(t *testing.T) {
	f := setup(t)
	const queues = 130
	msgs := make([]store.NewMessage, queues)
	var want []string
	for i := range msgs {
		msgs[i] = store.NewMessage{Queue: fmt.Sprintf("q%03d", i)}
		want = append(want, msgs[i].Queue)
	}
	f.enqueue(msgs...)

	var got []string
	var pages []string
	path := "/"
	for path != "" {
		code, page := f.get(path)
		if code != 200 {
			t.Fatalf("GET %s = %d", path, code)
		}
		names, _ := queueLinks(page)
		if len(names) == 0 || len(names) > 50 {
			t.Fatalf("GET %s lists %d queues, want 1 to 50", path, len(names))
		}
		got = append(got, names...)
		pages = append(pages, path)
		// The live update of a page counts the page's queues.
		live := regexp.MustCompile(`data-live="([^"]+)"`).FindStringSubmatch(page)
		_, body := f.get(html.UnescapeString(live[1]))
		var rows []struct{ Name string }
		if err := json.Unmarshal([]byte(body), &rows); err != nil {
			t.Fatal(err)
		}
		var liveNames []string
		for _, r := range rows {
			liveNames = append(liveNames, r.Name)
		}
		if !slices.Equal(liveNames, names) {
			t.Fatalf("the JSON of %s lists %v, the page %v", path, liveNames, names)
		}
		path = ""
		if m := nextLink.FindStringSubmatch(page); m != nil {
			path = html.UnescapeString(m[1])
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the pages list %d queues, want %d in order: %v", len(got), len(want), got)
	}
	if len(pages) != 3 {
		t.Fatalf("%d pages, want 3", len(pages))
	}
	// Back from the last page.
	_, last := f.get(pages[2])
	m := prevLink.FindStringSubmatch(last)
	if m == nil {
		t.Fatal("the last page has no link to the page before it")
	}
	_, prev := f.get(html.UnescapeString(m[1]))
	if names, _ := queueLinks(prev); !slices.Equal(names, want[50:100]) {
		t.Fatalf("the page before the last lists %v, want %v", names, want[50:100])
	}
	// Without a page, the JSON is the first page.
	_, body := f.get("/api/queues")
	var rows []struct{ Name string }
	if err := json.Unmarshal([]byte(body), &rows); err != nil || len(rows) != 50 {
		t.Fatalf("/api/queues has %d rows, %v; want 50", len(rows), err)
	}
}

// Every queue name reaches its page from the queues page: dots alone,
// slashes, percent signs, spaces, and names like paths.
func TestEveryQueueNameHasItsPage(t *testing.T) {
	f := setup(t)
	names := []string{".", "..", "...", "a/b", "a/../b", "../x", "50%", "%2e%2e", "with space", "q?x=1#y", "ünï"}
	for _, n := range names {
		f.enqueue(store.NewMessage{Queue: n, Payload: []byte("m")})
	}
	_, page := f.get("/")
	got, links := queueLinks(page)
	slices.Sort(names)
	if !slices.Equal(got, names) {
		t.Fatalf("the queues page lists %q, want %q", got, names)
	}
	for i, link := range links {
		code, qpage := f.get(link)
		if code != 200 {
			t.Fatalf("GET %s (queue %q) = %d", link, got[i], code)
		}
		title := "<title>Queue " + html.EscapeString(got[i])
		if !strings.Contains(qpage, title) {
			t.Fatalf("GET %s did not show queue %q", link, got[i])
		}
		for _, sub := range []string{"/dead", "/keys", "?state=pending"} {
			if code, _ := f.get(link + sub); code != 200 {
				t.Fatalf("GET %s%s = %d", link, sub, code)
			}
		}
	}
}
