package leasehold

import (
	"maps"
	"slices"
)

// sortedQueues are the names of the queues in cfg, sorted.
func sortedQueues(cfg Config) []string { return slices.Sorted(maps.Keys(cfg.Queues)) }
