package demoscene

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/store"
)

// Kinds the handler tells apart.
const (
	kindSettle  = "invoice.settle"
	kindWebhook = "webhook.deliver"
	kindEmail   = "email.send"
)

// downPartner is the webhook endpoint that never answers well.
const downPartner = "https://partner.example.net/hooks/leasehold"

// downErrors are the errors of the down partner's deliveries, in turn.
var downErrors = []string{
	"POST " + downPartner + ": 503 Service Unavailable",
	"POST " + downPartner + ": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
	"POST " + downPartner + ": dial tcp 203.0.113.7:443: connect: connection refused",
}

// bounce is the domain of addresses the mail server rejects for good.
const bounce = "@bounce.invalid"

// handle does a message's work: a fraction of a second of it, or, for the
// settlement, until the scene stops. Which messages fail, and how, is
// decided by their ids and attempts, so that every run of the scene
// fails the same ones.
func (s *Scene) handle(ctx context.Context, m *worker.Message) error {
	switch {
	case m.Kind == kindSettle:
		select {
		case <-s.stopping:
			// Given back without counting the delivery, and out of sight
			// of the other worker until both have stopped.
			return worker.Snooze(time.Minute)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	case m.Kind == kindWebhook && bytes.Contains(m.Payload, []byte(downPartner)):
		return errors.New(downErrors[min(m.Attempt, len(downErrors))-1])
	case m.Kind == kindEmail && bytes.Contains(m.Payload, []byte(bounce)):
		return worker.Permanent(errors.New("smtp: 550 5.1.1 recipient address rejected: user unknown"))
	}
	if err := s.work(ctx, m.MessageID); err != nil {
		return err
	}
	if m.Attempt == 1 {
		switch {
		case m.Kind == kindEmail && m.MessageID%7 == 0:
			return errors.New("smtp: 421 4.7.0 mx.example.com: too many connections, try again later")
		case m.Kind == kindWebhook && m.MessageID%5 == 0:
			return errors.New("POST https://hooks.shop.example.com/orders: 502 Bad Gateway")
		}
	}
	return nil
}

// work takes between 120 and 500 ms, by the message's id.
func (s *Scene) work(ctx context.Context, id int64) error {
	t := s.clk.NewTimer(time.Duration(120+id*53%380) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

var (
	people    = []string{"ann", "bob", "cy", "dana", "eli", "fay", "gus", "hana", "ivo", "jun", "kim", "lou"}
	templates = []string{"order-confirmation", "shipping-update", "password-reset", "weekly-newsletter"}
	events    = []string{"order.paid", "order.shipped", "refund.created", "order.cancelled"}
	endpoints = []string{"https://hooks.shop.example.com/orders", "https://erp.example.org/leasehold/events"}
)

// email is the producer's nth email: every 40th to an address that
// bounces.
func email(n int) store.NewMessage {
	to := people[n%len(people)] + "@example.com"
	if n%40 == 39 {
		to = "orders-archive" + bounce
	}
	return store.NewMessage{Queue: Emails, Kind: kindEmail,
		Payload: fmt.Appendf(nil, `{"to":%q,"template":%q,"order":%d}`, to, templates[n%len(templates)], 72000+n)}
}

// payment is the producer's nth payment, of one of a dozen customers (not
// LaneKey, whose payments wait).
func payment(n int) store.NewMessage {
	kind := "payment.charge"
	if n%10 == 9 {
		kind = "payment.refund"
	}
	customer := fmt.Sprintf("customer-%d", 1001+n%12)
	return store.NewMessage{Queue: Payments, Key: customer, Kind: kind,
		Payload: fmt.Appendf(nil, `{"customer":%q,"amount":%d,"currency":"EUR"}`, customer, 500+n*739%20000)}
}

func webhook(n int) store.NewMessage {
	return store.NewMessage{Queue: Webhooks, Kind: kindWebhook,
		Payload: fmt.Appendf(nil, `{"url":%q,"event":%q,"order":%d}`, endpoints[n%len(endpoints)], events[n%len(events)], 72000+n)}
}

func thumbnail(n int) store.NewMessage {
	return store.NewMessage{Queue: Thumbnails, Kind: "image.resize",
		Payload: fmt.Appendf(nil, `{"image":"uploads/2026/11/IMG_%04d.jpg","sizes":[160,480,1200]}`, 4100+n)}
}
