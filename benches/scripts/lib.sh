# Shared by the measurement scripts in this directory (sourced, not run).
#
# Binaries are looked up in $RMQ_BENCH_BIN (default: target/release of this checkout):
# `rmq-bench` there, and each server build under the name a script is given (copy release
# builds of the commits to compare there, e.g. ns-main and ns-branch). The name `canned`
# starts `rmq-bench canned`, the no-work ceiling.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
B=${RMQ_BENCH_BIN:-$here/../../target/release}
WORK=${TMPDIR:-/tmp}/rmq-bench-runs
mkdir -p "$WORK"

# start_server NAME [CANNED_BODY_BYTES]: a fresh server on an ephemeral port, its own log
# and KV files; prints "PID ADDR".
start_server() {
  local name=$1 dir addr=
  dir=$(mktemp -d "$WORK/run.XXXX")
  if [ "$name" = canned ]; then
    "$B/rmq-bench" canned --body-bytes "${2:-0}" > "$dir/out.txt" 2>&1 &
  else
    "$B/$name" --listenPort=0 --logPath="$dir/ns.log" --kvConfigPath="$dir/kv.json" \
      > "$dir/out.txt" 2>&1 &
  fi
  local pid=$!
  for _ in $(seq 200); do
    addr=$(grep -o 'listening on [0-9.:]*' "$dir/out.txt" | head -1 | awk '{print $3}')
    [ -n "$addr" ] && break
    sleep 0.05
  done
  [ -n "$addr" ] || { echo "start_server: $name did not start (see $dir/out.txt)" >&2; return 1; }
  echo "$pid ${addr/0.0.0.0/127.0.0.1}"
}
