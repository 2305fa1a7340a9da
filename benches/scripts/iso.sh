#!/bin/bash
# Route latency during a registration storm, measured by a separate client process: one
# rmq-bench process registers (default: 100 brokers at 20,000 registrations/s), another looks
# routes up at 10,000/s over 16 connections and reports their latency, so the measuring
# client does no registration work of its own (in `rmq-bench mixed` both share one thread).
#
# usage: iso.sh SERVER-BUILD OUTPREFIX [STORM WORKLOAD ARGS]   e.g. iso.sh ns-main /tmp/iso1
source "$(dirname "$0")/lib.sh"
bin=$1; out=$2; shift 2 2>/dev/null
[ -n "$out" ] || { sed -n 2,7p "$0"; exit 2; }
storm=${*:-register --rate 20000}
read -r pid addr < <(start_server "$bin") || exit 1
# Topics the storm's brokers register (rmq-bench's default layout).
topics=$(python3 -c "print(','.join('BenchTopic_%06d' % i for i in range(0, 5000, 25)))")
"$B/rmq-bench" $storm -n "$addr" -d 16 --json --quiet --pid "$pid" > "$out.storm.json" 2> "$out.storm.err" &
storm_pid=$!
# The storm's setup (first registrations) is over well before this.
sleep 4
"$B/rmq-bench" route -n "$addr" --rate 10000 --clients 16 --depth 16 --topic "$topics" -d 10 \
  --json --quiet > "$out.route.json" 2> "$out.route.err"
wait $storm_pid
kill "$pid"; wait "$pid" 2>/dev/null
python3 - "$bin" "$out" <<'PY'
import json, sys
bin, out = sys.argv[1], sys.argv[2]
r = json.load(open(out + '.route.json')); s = json.load(open(out + '.storm.json'))
lat = [c['latency_us'] for p in r['phases'] for c in p['classes']][-1]
print(bin, 'route p50 %.0f us, p99 %.0f us, p99.9 %.0f us, max %.0f us, errors %d' % (
    lat['p50'], lat['p99'], lat['p999'], lat['max'], r['errors']))
m = s['machine']
print(bin, 'storm %.0f registrations/s, server %.2f cores, other %.2f cores' % (
    s['ops_per_s'], m['server_cores'], m['other_cores']))
PY
