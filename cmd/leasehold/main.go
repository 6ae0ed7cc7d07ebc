// Command leasehold puts messages on durable queues and works them under
// fenced, heartbeated leases, on an embedded SQLite file by default or on
// PostgreSQL. Run `leasehold --help` for the commands.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/script"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == script.SuperviseArg {
		os.Exit(script.Supervise(os.Args[2:]))
	}
	// First of all, before the environment's secrets are used: no other
	// process of the same user may read them from /proc.
	if err := script.Protect(); err != nil {
		fmt.Fprintf(os.Stderr, "leasehold: %s\n", oneLine(err))
		os.Exit(exitFailure)
	}
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError is a mistake in the command line: exit status 2, nothing
// done.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// app is one invocation's state.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	dbFlag         string
	logLevel       string
	logFormat      string
	dsn            dsn
	schemaFlag     string
	log            *slog.Logger
	// memoryOK allows --db memory: (bench).
	memoryOK bool
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "leasehold: %s\n", oneLine(err))
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFailure
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "leasehold",
		Short: "Lease-based work processing: durable queues, fenced leases, heartbeats, a reaper",
		Long: `leasehold puts messages on durable queues and runs a program per message
under a lease that is kept alive while it runs. A worker that dies loses its
leases to the reaper; a worker that lost its lease cannot complete.

The database is a SQLite file (default leasehold.db, created mode 0600 by the
first migrate, enqueue, work, serve or bench) or a PostgreSQL server (a postgres:// URL or a
libpq keyword/value string; run "leasehold migrate" once). A SQLite path is
used as written, with no percent-decoding. SQLite syncs every commit but a
claim's to disk (synchronous=full; a power failure may undo the last claims,
never reusing their fencing tokens); PATH?synchronous=normal syncs at checkpoints only, which
writes faster but may lose the last acknowledged commits in a power failure
(never in a crash of the process). Give a PostgreSQL password with
PGPASSWORD or a password file (PGPASSFILE, default ~/.pgpass), not in the
URL; connecting gives up after 10 s unless the DSN sets connect_timeout.
Only those five commands create leasehold's tables; every other one, on a
database without them, says so and changes nothing.`,
		Example: `  leasehold enqueue --queue emails '{"to":"ann@example.com"}'
  leasehold work --queue emails -- ./send-email.sh
  leasehold stats
  leasehold --db postgres://localhost/app migrate`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		Args:              noArgs,
		PersistentPreRunE: a.setup,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("missing command; see leasehold --help")
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.dbFlag, "db", "", "database: a SQLite file path or sqlite:PATH, optionally with ?synchronous=normal, a postgres:// URL or a libpq 'host=... dbname=...' string (env LEASEHOLD_DB; default leasehold.db)")
	pf.StringVar(&a.schemaFlag, "schema", "", "PostgreSQL only: the schema holding leasehold's tables, as the application's postgres.Config.Schema names it (env LEASEHOLD_SCHEMA; default leasehold)")
	pf.StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	pf.StringVar(&a.logFormat, "log-format", "text", "log format: text or json")
	root.AddCommand(a.migrateCommand(), a.enqueueCommand(), a.workCommand(), a.statsCommand(),
		a.listCommand(), a.deadCommand(), a.queueCommand(), a.cancelCommand(), a.pruneCommand(), a.reapCommand(), a.serveCommand(), a.demoCommand(), a.benchCommand())
	return root
}

// noArgs refuses positional arguments, naming the first as an unknown
// command for commands that only group others.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		if cmd.HasSubCommands() {
			return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
		}
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args[0])
	}
	return nil
}

// maxArgs refuses more than n positional arguments.
func maxArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return usagef("%s takes at most %d argument(s), got %d", cmd.CommandPath(), n, len(args))
		}
		return nil
	}
}

// setup checks the global flags before any command runs.
func (a *app) setup(cmd *cobra.Command, _ []string) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(a.logLevel)); err != nil || !validLevel(a.logLevel) {
		return usagef("--log-level %q: want debug, info, warn or error", a.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch a.logFormat {
	case "text":
		a.log = slog.New(slog.NewTextHandler(a.stderr, opts))
	case "json":
		a.log = slog.New(slog.NewJSONHandler(a.stderr, opts))
	default:
		return usagef("--log-format %q: want text or json", a.logFormat)
	}
	raw := a.dbFlag
	if !cmd.Flags().Changed("db") {
		raw = os.Getenv("LEASEHOLD_DB")
	}
	d, err := parseDSN(raw)
	if err != nil {
		return usageError{err}
	}
	schema := a.schemaFlag
	if !cmd.Flags().Changed("schema") {
		schema = os.Getenv("LEASEHOLD_SCHEMA")
	}
	if d.schema, err = schemaOf(d, schema); err != nil {
		return usageError{err}
	}
	a.dsn = d
	return nil
}

func validLevel(s string) bool {
	switch strings.ToLower(s) {
	case "debug", "info", "warn", "error":
		return true
	}
	return false
}

// How a command opens the database.
type openMode int

const (
	// openCreate creates and migrates a missing SQLite file or schema:
	// for the commands that start using a database (migrate, enqueue,
	// work, serve, bench).
	openCreate openMode = iota
	// openExisting writes to a leasehold database only: one without
	// leasehold's tables is refused, and left as it was.
	openExisting
	// openReadOnly reads a migrated database and changes nothing.
	openReadOnly
)

// open opens the database for a command that may start using it: a SQLite
// file is created and migrated.
func (a *app) open(ctx context.Context) (store.Store, error) { return a.openFor(ctx, openCreate) }

// openExisting opens the database for a command that changes what is in
// it: a database without leasehold's tables is an error, and nothing is
// created or changed.
func (a *app) openExisting(ctx context.Context) (store.Store, error) {
	return a.openFor(ctx, openExisting)
}

// deps are what the runtime's pieces that a command runs by itself (a
// reaper, a cleaner) work with: st, the system clock, the command's
// logger unless log names another, and the global meter.
func (a *app) deps(st store.Store, log *slog.Logger) maintenance.Deps {
	return maintenance.Deps{Store: st, Clock: clock.System(), Logger: cmp.Or(log, a.log), Meter: maintenance.Meter(nil)}
}

// openRead opens the database for a command that only reads: nothing is
// created or changed, and a database without the schema is an error.
func (a *app) openRead(ctx context.Context) (store.Store, error) { return a.openFor(ctx, openReadOnly) }

func (a *app) openFor(ctx context.Context, mode openMode) (store.Store, error) {
	if a.dsn.memory && !a.memoryOK {
		return nil, usagef("--db memory: is an in-memory store for bench only; it would lose everything at exit")
	}
	return openStore(ctx, a.dsn, mode)
}

// requireQueue checks a --queue value.
func requireQueue(q string) error {
	if q == "" {
		return usagef("--queue is required")
	}
	if err := storecore.CheckQueue(q); err != nil {
		return usagef("--queue: %v", err)
	}
	return nil
}
