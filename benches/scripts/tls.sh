#!/bin/bash
# TLS costs, on one server build with the `tls` feature (and an rmq-bench built with it):
#   1. route lookups and heartbeats over TLS against the same run in plain TCP (one permissive
#      port serves both), REPS interleaved repetitions;
#   2. a storm of new TLS connections (`openssl s_time -new`, handshake only, two at once)
#      while route lookups run at a fixed rate on connections made before it: handshakes per
#      second and the lookups' p99, against the same lookups without the storm;
#   3. RSS per idle TLS connection (1,000 connections that finished their handshake).
#
# usage: tls.sh NAME REPS    (NAME: a server build in $RMQ_BENCH_BIN, as ab.sh; D=SECONDS)
source "$(dirname "$0")/lib.sh"
name=$1; reps=${2:-3}
[ -n "$name" ] || { sed -n 2,12p "$0"; exit 2; }
D=${D:-10}
certs=$(mktemp -d "$WORK/certs.XXXX")
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=127.0.0.1 \
  -keyout "$certs/key.pem" -out "$certs/cert.pem" 2>/dev/null || exit 1

# start_tls: a fresh permissive server; prints "PID ADDR".
start_tls() {
  local dir; dir=$(mktemp -d "$WORK/run.XXXX")
  "$B/$name" --listenPort=0 --logPath="$dir/ns.log" --kvConfigPath="$dir/kv.json" \
    --tls.server.mode=permissive --tls.server.certPath="$certs/cert.pem" \
    --tls.server.keyPath="$certs/key.pem" > "$dir/out.txt" 2>&1 &
  local pid=$!
  echo "$pid $(listen_addr "$dir/out.txt")"
}

field() { python3 -c "import json,sys;d=json.load(open('$1'));print($2)"; }
route_p99='" ".join("%s:%.0fus" % (p["name"], c["latency_us"]["p99"]) for p in d["phases"] for c in p["classes"] if c["name"] == "route")'

echo "== 1. throughput over TLS / plain (ratio per repetition)"
for rep in $(seq "$reps"); do
  for wl in route heartbeat; do
    read -r pid addr < <(start_tls)
    for mode in plain tls; do
      flag=; [ $mode = tls ] && flag=--tls
      "$B/rmq-bench" $wl -d "$D" -n "$addr" $flag --json --quiet --pid "$pid" \
        > "$WORK/tls.$wl.$mode.json" 2>/dev/null
    done
    kill "$pid"; wait "$pid" 2>/dev/null
    p=$(field "$WORK/tls.$wl.plain.json" 'd["ops_per_s"]'); t=$(field "$WORK/tls.$wl.tls.json" 'd["ops_per_s"]')
    echo "rep$rep $wl plain $(printf %.0f "$p")/s tls $(printf %.0f "$t")/s ratio $(python3 -c "print(round($t/$p, 2))")"
  done
done

echo "== 2. route p99 (mixed, 10k lookups/s, 100 registrations/s) without and with a handshake storm"
for rep in $(seq "$reps"); do
  for storm in no yes; do
    read -r pid addr < <(start_tls)
    if [ $storm = yes ]; then
      for i in 1 2; do
        # Starts after the bench's setup (brokers and route connections are made first).
        (sleep 2; openssl s_time -connect "$addr" -new -time "$D" > "$WORK/s_time.$i" 2>&1) &
      done
    fi
    "$B/rmq-bench" mixed --rate 100 -d "$D" -n "$addr" --json --quiet --pid "$pid" \
      > "$WORK/tls.mixed.json" 2>/dev/null
    wait
    kill "$pid"; wait "$pid" 2>/dev/null
    hs=
    [ $storm = yes ] && hs="handshakes/s $(cat "$WORK"/s_time.[12] | awk '/connections in [0-9.]+ real/ {n+=$1; t=$4} END {printf "%.0f", n/t}')"
    echo "rep$rep storm=$storm route p99 $(field "$WORK/tls.mixed.json" "$route_p99") $hs"
  done
done

echo "== 3. RSS per idle TLS connection (1,000 connections)"
read -r pid addr < <(start_tls)
python3 - "$addr" "$pid" <<'EOF'
import socket, ssl, sys, time
host, port = sys.argv[1].rsplit(':', 1); pid = sys.argv[2]
def rss():
    for line in open(f'/proc/{pid}/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
plain = [socket.create_connection((host, int(port))) for _ in range(1000)]
time.sleep(1); before = rss()
tls = [ctx.wrap_socket(socket.create_connection((host, int(port)))) for _ in range(1000)]
time.sleep(1); after = rss()
print(f'RSS with 1,000 plain connections {before} KiB, plus 1,000 TLS ones {after} KiB: '
      f'{(after - before) / 1000:.1f} KiB per idle TLS connection')
EOF
kill "$pid"; wait "$pid" 2>/dev/null
