// Package layering holds the test that keeps the module's imports pointing
// down: the README's layout table lists the packages bottom-up, and a
// package may import only those listed above it (or in its own row).
package layering
