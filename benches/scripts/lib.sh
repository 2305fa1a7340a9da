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
# and KV files; prints "PID ADDR". NAME+prom: the build NAME with its Prometheus endpoint on,
# scraped once a second while the server lives (the scrapes' sizes go to its run directory).
start_server() {
  local name=$1 dir addr prom=
  dir=$(mktemp -d "$WORK/run.XXXX")
  case $name in *+prom) name=${name%+prom}; prom="--metricsExporterType=PROM --metricsPromExporterPort=0" ;; esac
  if [ "$name" = canned ]; then
    "$B/rmq-bench" canned --body-bytes "${2:-0}" > "$dir/out.txt" 2>&1 &
  else
    "$B/$name" --listenPort=0 --logPath="$dir/ns.log" --kvConfigPath="$dir/kv.json" $prom \
      > "$dir/out.txt" 2>&1 &
  fi
  local pid=$!
  addr=$(listen_addr "$dir/out.txt") ||
    { echo "start_server: $name did not start (see $dir/out.txt)" >&2; return 1; }
  if [ -n "$prom" ]; then
    local metrics=
    for _ in $(seq 40); do
      metrics=$(grep -o 'metrics listening on [0-9.:]*' "$dir/out.txt" | awk '{print $4}')
      [ -n "$metrics" ] && break
      sleep 0.05
    done
    (while kill -0 "$pid" 2>/dev/null; do
       curl -s -o /dev/null -w '%{size_download} %{time_total}\n' "http://${metrics/0.0.0.0/127.0.0.1}/metrics" >> "$dir/scrapes.txt"
       sleep 1
     done) > /dev/null 2>&1 &
  fi
  echo "$pid $addr"
}

# listen_addr OUTFILE: waits (up to 20 s) for a server's "listening on ADDR" line in OUTFILE
# and prints ADDR, with 0.0.0.0 made 127.0.0.1; fails if none came.
listen_addr() {
  local addr=
  for _ in $(seq 400); do
    addr=$(grep -o 'listening on [0-9.:]*' "$1" | head -1 | awk '{print $3}')
    [ -n "$addr" ] && { echo "${addr/0.0.0.0/127.0.0.1}"; return 0; }
    sleep 0.05
  done
  return 1
}
