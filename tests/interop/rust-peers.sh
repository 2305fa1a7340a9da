#!/usr/bin/env bash
# Interop with rocketmq-rust 1.0 (an independent Rust implementation of RocketMQ):
#   1. builds their broker (crates.io rocketmq-broker 1.0.0, binary rocketmq-broker-rust) with
#      `cargo install --locked` into a cache folder, and tests/interop/rust-admin (their admin
#      API, DefaultMQAdminExt from rocketmq-client-rust 1.0.0);
#   2. starts rmq-namesrv and their broker registered with it;
#   3. checks through their admin API that the cluster info and the route of every topic the
#      broker registered (TBW102, the cluster and broker-name topics, the system topics) read
#      back correctly and equal rmq-namesrv's own decoding of the same answers;
#   4. stops the broker and checks that it disappears from the cluster info and routes; then
#      does it again with SIGKILL (no UNREGISTER_BROKER: the closed connection must do it).
#
# A cold build takes about 15 minutes on 2 cores (later runs reuse the cache), so this is not
# part of .ci/run. Usage:
#     tests/interop/rust-peers.sh
# Environment:
#     RMQ_INTEROP_CACHE   cache folder (default ${XDG_CACHE_HOME:-$HOME/.cache}/rmq-namesrv-interop)
#     RMQ_INTEROP_BROKER_PORT  the broker's first choice of port (default 30911; it also uses
#                         port-2 and port+1; the next free block of 1000 up is taken if busy).
#                         rmq-namesrv takes an ephemeral port.
#     RMQ_INTEROP_KEEP=1  keep the work folder (logs, broker store) after the run
# Exit status 0 = every check passed.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

cache="${RMQ_INTEROP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rmq-namesrv-interop}"
broker_port="${RMQ_INTEROP_BROKER_PORT:-30911}"
cluster="RustInteropCluster"
broker_name="rust-broker-a"
mkdir -p "$cache"

say() { echo "== $*"; }

# ---------------------------------------------------------------- build
broker_bin="$cache/root/bin/rocketmq-broker-rust"
if [ -x "$broker_bin" ] && "$broker_bin" --version 2>/dev/null | grep -qx 'version=1.0.0'; then
    say "rocketmq-broker 1.0.0 already built: $broker_bin"
else
    say "building rocketmq-broker 1.0.0 (cold: ~15 min on 2 cores) into $cache/root"
    CARGO_TARGET_DIR="$cache/target" cargo install --locked rocketmq-broker@1.0.0 --root "$cache/root"
fi

say "building tests/interop/rust-admin (DefaultMQAdminExt from rocketmq-client-rust 1.0.0)"
CARGO_TARGET_DIR="$cache/target" cargo build --release --locked \
    --manifest-path tests/interop/rust-admin/Cargo.toml
admin_bin="$cache/target/release/rmq-namesrv-interop-rust-admin"

say "building rmq-namesrv"
namesrv_target="${CARGO_TARGET_DIR:-$repo/target}"
cargo build --release --bin rmq-namesrv
namesrv_bin="$namesrv_target/release/rmq-namesrv"

# ---------------------------------------------------------------- run
work=$(mktemp -d "${TMPDIR:-/tmp}/rmq-rust-peers.XXXXXX")
ns_pid=""
broker_pid=""
cleanup() {
    local rc=$?
    set +e
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
    [ -n "$ns_pid" ] && kill "$ns_pid" 2>/dev/null && wait "$ns_pid" 2>/dev/null
    if [ "$rc" -ne 0 ]; then
        echo "---- rmq-namesrv log (tail)"; tail -n 40 "$work/namesrv.log" 2>/dev/null || true
        echo "---- rocketmq-broker-rust log (tail)"; tail -n 60 "$work/broker.log" 2>/dev/null || true
        echo "!! rust-peers FAILED (work folder: $work)"
    elif [ "${RMQ_INTEROP_KEEP:-0}" != "1" ]; then
        rm -rf "$work"
    fi
    exit "$rc"
}
trap cleanup EXIT

in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

say "starting rmq-namesrv on an ephemeral loopback port"
"$namesrv_bin" --bindAddress=127.0.0.1 --listenPort=0 \
    --kvConfigPath="$work/kvConfig.json" --configStorePath="$work/namesrv.properties" \
    --logLevel=info >"$work/namesrv.log" 2>&1 &
ns_pid=$!
ns_port=""
for _ in $(seq 1 50); do
    ns_port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/namesrv.log" | head -n 1)
    [ -n "$ns_port" ] && break
    sleep 0.2
done
[ -n "$ns_port" ] || { echo "rmq-namesrv did not start"; exit 1; }
say "rmq-namesrv listens on 127.0.0.1:$ns_port"

while in_use "$broker_port" || in_use $((broker_port - 2)) || in_use $((broker_port + 1)); do
    broker_port=$((broker_port + 1000))
    [ "$broker_port" -lt 65000 ] || { echo "no free port block for the broker"; exit 1; }
done
broker_addr="127.0.0.1:${broker_port}"

mkdir -p "$work/home" "$work/store"
cat >"$work/broker.properties" <<EOF
brokerClusterName=$cluster
brokerName=$broker_name
brokerId=0
brokerIP1=127.0.0.1
listenPort=$broker_port
haListenPort=$((broker_port + 1))
namesrvAddr=127.0.0.1:$ns_port
storePathRootDir=$work/store
autoCreateTopicEnable=true
EOF

start_broker() {
    say "starting rocketmq-broker-rust $broker_name at $broker_addr"
    HOME="$work/home" ROCKETMQ_HOME="$work/home" "$broker_bin" \
        -c "$work/broker.properties" -n "127.0.0.1:$ns_port" >>"$work/broker.log" 2>&1 &
    broker_pid=$!
    say "checking cluster info and routes through rocketmq-rust's admin API"
    "$admin_bin" "127.0.0.1:$ns_port" registered "$cluster" "$broker_name" "$broker_addr" 120
}

stop_broker() { # signal
    say "stopping the broker (SIG$1)"
    kill "-$1" "$broker_pid"
    for _ in $(seq 1 150); do
        kill -0 "$broker_pid" 2>/dev/null || break
        sleep 0.2
    done
    if kill -0 "$broker_pid" 2>/dev/null; then
        echo "broker did not stop in 30 s: SIGKILL"
        kill -KILL "$broker_pid"
    fi
    wait "$broker_pid" 2>/dev/null || true
    broker_pid=""
    say "checking that the broker is gone"
    "$admin_bin" "127.0.0.1:$ns_port" gone "$cluster" "$broker_name" 60
}

# A clean shutdown sends UNREGISTER_BROKER (104).
start_broker
stop_broker TERM
# A crash only closes the registering connection; that alone must unregister it.
start_broker
stop_broker KILL

say "rust-peers: all checks passed"
