// Package lifecycle runs loops and stops them well: waiting for a condition
// on an injected clock, and (as the package grows) runnable loops, groups of
// loops and signal-driven graceful shutdown.
package lifecycle
