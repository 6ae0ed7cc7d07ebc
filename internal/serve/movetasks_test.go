package serve_test

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// A running server runs the message move tasks started through it: dead
// letters go back to their queue, where a waiting receive gets them. The
// fake clock does not move, so only the task can end the wait.
func TestServerRunsMoveTasks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f, _ := running(t, b)
		f.createQueue("dlq", nil)
		src := f.createQueue("src", map[string]string{
			"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":"1"}`})
		f.send(src, "a", "")
		f.send(src, "b", "")
		if got := f.receive(src, 10, 30); len(got) != 2 {
			t.Fatalf("received %v", bodies(got))
		}
		f.clk.Advance(31 * time.Second)
		f.reap()
		// The server's own reaper may be the one that moves them, in a
		// transaction of its own: the task starts once both are there,
		// as a task started on an empty dead-letter queue moves nothing.
		for deadline := time.Now().Add(10 * time.Second); ; {
			st, err := f.st.Stats(f.ctx, "dlq")
			if err != nil {
				t.Fatal(err)
			}
			if st.Pending == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the dead-letter queue holds %+v, not the two dead letters", st)
			}
			runtime.Gosched()
		}
		if _, err := f.c.StartMessageMoveTask(f.ctx, &sqs.StartMessageMoveTaskInput{
			SourceArn: aws.String("arn:aws:sqs:us-east-1:000000000000:dlq")}); err != nil {
			t.Fatal(err)
		}
		var got []string
		for len(got) < 2 {
			r := <-f.longPoll(src, 20)
			if r.err != nil {
				t.Fatal(r.err)
			}
			for _, m := range r.out.Messages {
				got = append(got, *m.Body)
			}
		}
		if slices.Sort(got); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("the source got back %v", got)
		}
	})
}
