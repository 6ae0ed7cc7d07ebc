package main

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/store/postgres"
)

func (a *app) migrateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the database schema",
		Long: `migrate creates the schema, or upgrades it to this version of leasehold.
Several processes may migrate at once. A SQLite file is also created and
migrated by enqueue, work, serve and bench. Every other command works on a
leasehold database only: on one without leasehold's tables (an
application's own SQLite file, say) it says so and changes nothing, its
journal mode included. The commands that only read (stats, list, dead
list) change no database at all.`,
		Example: `  leasehold migrate
  leasehold --db postgres://localhost/app migrate
  leasehold --db postgres://localhost/app --schema jobs migrate`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if a.dsn.postgres == "" {
				st, err := a.open(ctx)
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "migrated %s\n", a.dsn)
				return st.Close()
			}
			pc, err := postgres.PoolConfig(a.dsn.postgres)
			if err != nil {
				return err
			}
			pool, err := pgxpool.NewWithConfig(ctx, pc)
			if err != nil {
				return err
			}
			defer pool.Close()
			if err := postgres.Migrate(ctx, pool, a.dsn.schema); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "migrated schema %s of the %s\n", a.dsn.schema, a.dsn)
			return nil
		},
	}
	return cmd
}
