#!/usr/bin/env bash
# compare.sh runs `leasehold bench` and bench/river (River) in turn, N rounds,
# against one PostgreSQL database with the same settings, and prints one
# table: each round's throughput and ratio, the min / median / max of each,
# and, when the server runs on this machine, the CPU time its backends
# spent per message. See bench/river/README.md.
set -euo pipefail

usage() {
	cat <<'EOF'
usage: bench/compare.sh [flags]
  --db URL                 PostgreSQL URL (default $LEASEHOLD_DB, else
                           postgres://postgres@127.0.0.1:5432/leasehold_bench?sslmode=disable)
  --schema NAME            leasehold's schema (default leasehold)
  --rounds N               rounds, each one run of both (default 3)
  --duration D             each run's duration (default 20s)
  --warmup D               a run of each side before the rounds, not
                           counted (default 5s; 0: none): the first run
                           after the machine was idle is slower, whichever
                           side makes it
  --workers N              clients in each process (default 1)
  --concurrency N          handlers per client, of each side (default:
                           River's benchmark's, 2000)
  --leasehold-concurrency N
                           leasehold's handlers per client, when they are
                           to differ from River's
  --payload N              bytes per message (default 100)
  --fetch-cooldown D       River's FetchCooldown (default: River's benchmark's, 2ms)
  --fetch-poll-interval D  River's FetchPollInterval (default: River's benchmark's, 20ms)
Binaries are built from this checkout unless LEASEHOLD_BIN or RIVER_BIN name them.
Each leasehold run starts on a compacted messages table (VACUUM FULL), as
each River run starts on an emptied and compacted river_job, and each
run of either after a CHECKPOINT.
EOF
}

db=${LEASEHOLD_DB:-postgres://postgres@127.0.0.1:5432/leasehold_bench?sslmode=disable}
schema=leasehold rounds=3 duration=20s warmup=5s workers=1 concurrency=2000 lh_concurrency= payload=100
river_fetch=()
# Each flag names the variable it sets; River's fetch settings are passed
# on as they came.
while [ $# -gt 0 ]; do
	case $1 in
	-h | --help) usage; exit 0 ;;
	--db) var=db ;;
	--schema) var=schema ;;
	--rounds) var=rounds ;;
	--duration) var=duration ;;
	--warmup) var=warmup ;;
	--workers) var=workers ;;
	--concurrency) var=concurrency ;;
	--leasehold-concurrency) var=lh_concurrency ;;
	--payload) var=payload ;;
	--fetch-cooldown | --fetch-poll-interval) var=river_fetch ;;
	*) echo "compare.sh: unknown flag $1" >&2; usage >&2; exit 2 ;;
	esac
	[ $# -ge 2 ] || { echo "compare.sh: $1 needs a value" >&2; exit 2; }
	if [ $var = river_fetch ]; then
		river_fetch+=("$1" "$2")
	else
		printf -v "$var" '%s' "$2"
	fi
	shift 2
done
case $rounds in '' | *[!0-9]* | 0) echo "compare.sh: --rounds $rounds: want a positive number" >&2; exit 2 ;; esac
lh_concurrency=${lh_concurrency:-$concurrency}

here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "${LEASEHOLD_BIN:-}" ]; then
	(cd "$here/.." && go build -o "$work/leasehold" ./cmd/leasehold)
	LEASEHOLD_BIN=$work/leasehold
fi
if [ -z "${RIVER_BIN:-}" ]; then
	(cd "$here/river" && go build -o "$work/river" .)
	RIVER_BIN=$work/river
fi

# psql takes the URL without the pool's parameters, which are pgx's.
psql_url=$(printf '%s' "$db" | sed -E 's/([?&])(pool_[a-z_]+|leasehold_listen)=[^&]*/\1/g; s/&&+/\&/g; s/[?&]$//; s/\?&/?/')
dbname=$(printf '%s' "$psql_url" | sed -E 's|^[a-z]+://[^/]*/([^?]*).*|\1|')
# The database is created when missing, through the server's postgres
# database, as bench/river creates its own.
admin_url=$(printf '%s' "$psql_url" | sed -E 's|^([a-z]+://[^/]*/)[^?]*|\1postgres|')
printf '%s\n' "SELECT 'CREATE DATABASE ' || quote_ident(:'name') WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'name') \\gexec" |
	psql -X -q -v ON_ERROR_STOP=1 -v name="$dbname" "$admin_url" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 "$psql_url" -c 'SELECT 1' >/dev/null
# A fresh database gets leasehold's schema; one migrated already is left
# as it is.
"$LEASEHOLD_BIN" --db "$db" --schema "$schema" --log-level error migrate >/dev/null

# backend_cpu prints the CPU time, in clock ticks, that the server's
# backends of the database have used so far; empty when the server's
# processes are not visible here.
backend_cpu() {
	local total=0 seen=0 d cmd st
	for d in /proc/[0-9]*; do
		IFS= read -r -d '' cmd 2>/dev/null <"$d/cmdline" || continue
		case $cmd in "postgres: "*" $dbname "*) ;; *) continue ;; esac
		read -r -a st 2>/dev/null <"$d/stat" || continue
		total=$((total + st[13] + st[14])) seen=1
	done
	[ $seen = 1 ] && echo $total || true
}

# run NAME D CMD... runs one measurement of CMD for D, its JSON in
# $work/NAME.json, and samples the backends' CPU from 3 s after the start
# to 2 s before the end of the timed window, in $work/NAME.cpu: ticks and
# seconds sampled.
run() {
	local name=$1 d=$2 secs
	shift 2
	secs=$(awk -v d="$d" 'BEGIN { n = d + 0; if (d ~ /ms$/) n /= 1000; else if (d ~ /m$/) n *= 60; print n }')
	"$@" --duration "$d" >"$work/$name.json" 2>"$work/$name.err" &
	local pid=$! from to
	if awk -v s="$secs" 'BEGIN { exit !(s >= 8) }'; then
		sleep 3
		from=$(backend_cpu)
		sleep "$(awk -v s="$secs" 'BEGIN { print s - 5 }')"
		to=$(backend_cpu)
		[ -n "$from" ] && [ -n "$to" ] && echo "$((to - from)) $(awk -v s="$secs" 'BEGIN { print s - 5 }')" >"$work/$name.cpu"
	fi
	if ! wait $pid; then
		echo "compare.sh: $name failed:" >&2
		cat "$work/$name.err" >&2
		exit 1
	fi
}

hz=$(getconf CLK_TCK)
common=(--workers "$workers" --payload "$payload" --json)
if [ "$warmup" != 0 ]; then
	run warm-lh "$warmup" "$LEASEHOLD_BIN" --db "$db" --schema "$schema" --log-level error bench --concurrency "$lh_concurrency" "${common[@]}"
	run warm-rv "$warmup" "$RIVER_BIN" --db "$db" "${river_fetch[@]}" --concurrency "$concurrency" "${common[@]}"
fi
rows=()
for r in $(seq 1 "$rounds"); do
	order="leasehold river"
	[ $((r % 2)) = 0 ] && order="river leasehold"
	for who in $order; do
		# Each run starts with the server's dirty pages written out, so that
		# none pays for the writes of the run before it, the other side's.
		psql -X -q "$psql_url" -c CHECKPOINT 2>/dev/null || true
		if [ $who = leasehold ]; then
			psql -X -q -v ON_ERROR_STOP=1 "$psql_url" -c "VACUUM FULL \"$schema\".messages" 2>/dev/null || true
			run "lh$r" "$duration" "$LEASEHOLD_BIN" --db "$db" --schema "$schema" --log-level error bench --concurrency "$lh_concurrency" "${common[@]}"
		else
			run "rv$r" "$duration" "$RIVER_BIN" --db "$db" "${river_fetch[@]}" --concurrency "$concurrency" "${common[@]}"
		fi
	done
	rows+=("$r ${order// /,} $(cut -d' ' -f1 /proc/loadavg)")
done

# mps NAME: messages per second; cpu NAME: backend CPU µs per message, or -.
mps() { jq -r '.messages_per_second' "$work/$1.json"; }
cpu() {
	if [ -s "$work/$1.cpu" ]; then
		read -r ticks secs <"$work/$1.cpu"
		awk -v t="$ticks" -v s="$secs" -v hz="$hz" -v r="$(mps "$1")" 'BEGIN { printf "%.1f", t / hz * 1e6 / (r * s) }'
	else
		echo -
	fi
}

echo "leasehold $(git -C "$here" describe --always --dirty 2>/dev/null || echo '?') vs River $(sed -n 's/^river //p' "$work/rv1.err" | head -1)"
echo "$(nproc) cores, $(uname -m); $duration each after a warm-up of $warmup, leasehold $workers x $lh_concurrency handlers, River $workers x $concurrency, $payload-byte payloads; database $dbname"
printf '%-6s %-16s %12s %12s %7s %14s %14s %6s\n' round order leasehold river ratio "lh pg µs/msg" "river pg µs/msg" load
for row in "${rows[@]}"; do
	read -r r order load <<<"$row"
	l=$(mps "lh$r") v=$(mps "rv$r")
	printf '%-6s %-16s %12.0f %12.0f %6.2fx %14s %14s %6s\n' "$r" "$order" "$l" "$v" "$(awk -v a="$l" -v b="$v" 'BEGIN { print a / b }')" \
		"$(cpu "lh$r")" "$(cpu "rv$r")" "$load"
done
# stats prints min / median / max of its arguments.
stats() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.0f / %.0f / %.0f", a[1], m, a[NR] }'; }
ls=() vs=() rs=()
for r in $(seq 1 "$rounds"); do
	ls+=("$(mps "lh$r")") vs+=("$(mps "rv$r")")
	rs+=("$(awk -v a="$(mps "lh$r")" -v b="$(mps "rv$r")" 'BEGIN { print a / b }')")
done
echo "leasehold msgs/s min / median / max: $(stats "${ls[@]}")"
echo "River     msgs/s min / median / max: $(stats "${vs[@]}")"
printf 'ratio per round min / median / max: %s; overall (sum over sum): %.2fx\n' \
	"$(printf '%s\n' "${rs[@]}" | sort -g | awk '{ a[NR] = $1 } END { m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.2fx / %.2fx / %.2fx", a[1], m, a[NR] }')" \
	"$(printf '%s %s\n' "${ls[*]}" "${vs[*]}" | awk -v n="$rounds" '{ for (i = 1; i <= n; i++) { a += $i; b += $(i + n) } print a / b }')"
