// Package anyjob lets leasehold's own command run a client whose one
// handler takes jobs of every kind as they are stored (the payload's bytes,
// a reply for a request), and watch the client's claim loops. A Go program
// handles typed jobs instead; this is not public API.
//
// Package leasehold fills in the functions when it is loaded.
package anyjob

import "github.com/leasehold/leasehold/internal/worker"

// Handle makes h handle every job of client c, a *leasehold.Client, whose
// kind has no handler of its own. It panics after the client started.
var Handle func(c any, h worker.Handler)

// Heartbeats returns the heartbeats of c's claim loops, by queue, once c
// has started; nil before.
var Heartbeats func(c any) map[string]*worker.Heartbeat
