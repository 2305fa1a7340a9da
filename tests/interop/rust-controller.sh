#!/usr/bin/env bash
# Failover through rmq-namesrv's embedded Controller with real brokers: rocketmq-rust 1.0
# (crates.io rocketmq-broker 1.0.0, binary rocketmq-broker-rust) in controller mode.
#   1. builds their broker (cached as tests/interop/rust-peers.sh does), rmq-namesrv with
#      --features controller, and rmq-admin;
#   2. starts rmq-namesrv hosting the Controller, then two brokers of one broker set
#      (enableControllerMode=true, controllerAddr = the controller's port);
#   3. waits until the first is master (routed as id 0) and the second a slave, both alive in
#      the controller's view (rmq-admin getSyncStateSet); sends a message to the master;
#   4. SIGKILLs the master (SIGSTOPs it with RMQ_INTEROP_SIGNAL=STOP) and measures until the
#      name server routes the former slave as id 0 (the controller elects it, tells it with
#      1008, it re-registers as master);
#   5. checks the controller's view (new master, masterEpoch), the name server's stored
#      stateVersion (= masterEpoch) and route, and that the new master accepts a message (it
#      fences writes until a heartbeat answer grants it a write lease, a rocketmq-rust
#      extension; the controller grants one 12 s after the master change).
#
# rocketmq-rust 1.0 brokers never send 1001 ALTER_SYNC_STATE_SET (their BrokerOuterAPI has the
# call, nothing calls it), so a slave never joins the controller's SyncStateSet, and Java's
# elect policy only elects from that set. The controller therefore runs with
# enableElectUncleanMaster=true (elect any alive registered broker) unless
# RMQ_INTEROP_UNCLEAN=false, which waits for an in-sync slave (it never comes with 1.0).
#
# With RMQ_INTEROP_CONTROLLERS=3 the Controller is a Raft group of three rmq-namesrv processes
# (each a name server too): the brokers get all three controller and name-server addresses,
# and the controller group's leader is killed (SIGKILL) together with the broker master; the
# failover is measured the same way, on a surviving name server.
#
# Manual, not part of .ci/run (the broker's cold build takes 30+ minutes on 2 cores). Usage:
#     tests/interop/rust-controller.sh
# Environment:
#     RMQ_INTEROP_CACHE        cache folder (default ${XDG_CACHE_HOME:-$HOME/.cache}/rmq-namesrv-interop)
#     RMQ_INTEROP_BROKER_PORT  first broker's port (default 30911; each broker also uses port-2
#                              and port+1; the second broker takes port+100)
#     RMQ_INTEROP_HB_TIMEOUT   the brokers' controllerHeartbeatTimeoutMills (default: theirs)
#     RMQ_INTEROP_UNCLEAN      the controller's enableElectUncleanMaster (default true, see above)
#     RMQ_INTEROP_SIGNAL       KILL (default: connections close, seen at once) or STOP (a hung
#                              master: found by the heartbeat timeout and the expiry scan)
#     RMQ_INTEROP_SCAN_MS      the controller's scanNotActiveBrokerInterval (default 5000)
#     RMQ_INTEROP_CONTROLLERS  1 (default) or 3: a Raft group, its leader killed with the master
#     RMQ_INTEROP_KEEP=1       keep the work folder (logs, stores) after the run
#     RMQ_INTEROP_STRICT=1     fail when the new master's stateVersion is not the masterEpoch
#                              (rocketmq-rust 1.0 re-registers with the version it had)
# Exit status 0 = every check passed. The failover time is printed on the last lines.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

cache="${RMQ_INTEROP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rmq-namesrv-interop}"
base_port="${RMQ_INTEROP_BROKER_PORT:-30911}"
cluster="RustControllerCluster"
unclean="${RMQ_INTEROP_UNCLEAN:-true}"
signal="${RMQ_INTEROP_SIGNAL:-KILL}"
controllers="${RMQ_INTEROP_CONTROLLERS:-1}"
case "$controllers" in 1|3) ;; *) echo "RMQ_INTEROP_CONTROLLERS must be 1 or 3"; exit 2;; esac
broker_name="rust-ctrl-a"
mkdir -p "$cache"

say() { echo "== $*"; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# ---------------------------------------------------------------- build
broker_bin="$cache/root/bin/rocketmq-broker-rust"
if [ -x "$broker_bin" ] && "$broker_bin" --version 2>/dev/null | grep -qx 'version=1.0.0'; then
    say "rocketmq-broker 1.0.0 already built: $broker_bin"
else
    say "building rocketmq-broker 1.0.0 (cold: 30+ min on 2 cores) into $cache/root"
    CARGO_TARGET_DIR="$cache/target" cargo install --locked rocketmq-broker@1.0.0 --root "$cache/root"
fi

say "building rmq-namesrv with the controller feature, and rmq-admin"
target="${CARGO_TARGET_DIR:-$repo/target}"
work=$(mktemp -d "${TMPDIR:-/tmp}/rmq-rust-controller.XXXXXX")
cargo build --release --features controller --bin rmq-namesrv --bin rmq-admin
# Copied: a later build without the feature replaces target/release/rmq-namesrv.
cp "$target/release/rmq-namesrv" "$work/rmq-namesrv"
cp "$target/release/rmq-admin" "$work/rmq-admin"
admin="$work/rmq-admin"

# ---------------------------------------------------------------- run
ns_pids=()
pids=()
cleanup() {
    local rc=$?
    set +e
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    for p in "${ns_pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    if [ "$rc" -ne 0 ]; then
        for f in "$work"/namesrv*.log; do
            echo "---- $f (tail)"; tail -n 60 "$f" 2>/dev/null
        done
        for b in a b; do
            echo "---- broker $b log (tail)"; tail -n 40 "$work/broker-$b.log" 2>/dev/null
        done
        echo "!! rust-controller FAILED (work folder: $work)"
    elif [ "${RMQ_INTEROP_KEEP:-0}" != "1" ]; then
        rm -rf "$work"
    fi
    exit "$rc"
}
trap cleanup EXIT

in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

namesrv_conf() { # file self-id peers store
    cat >"$1" <<EOF
bindAddress=127.0.0.1
listenPort=0
kvConfigPath=$work/kvConfig-$2.json
logPath=
enableControllerInNamesrv=true
controllerDLegerGroup=interop
controllerDLegerPeers=$3
controllerDLegerSelfId=$2
controllerStorePath=$4
enableElectUncleanMaster=$unclean
scanNotActiveBrokerInterval=${RMQ_INTEROP_SCAN_MS:-5000}
EOF
}
ns_addrs=(); ctrl_addrs=()
start_namesrv() { # index conf (sets ns_pids, ns_addrs, ctrl_addrs at index)
    "$work/rmq-namesrv" -c "$2" >"$work/namesrv-$1.out" 2>"$work/namesrv-$1.log" &
    ns_pids[$1]=$!
    local ns="" ctrl=""
    for _ in $(seq 1 50); do
        ns=$(sed -n 's/^rmq-namesrv listening on //p' "$work/namesrv-$1.out")
        ctrl=$(sed -n 's/^rmq-namesrv controller listening on //p' "$work/namesrv-$1.out")
        [ -n "$ns" ] && [ -n "$ctrl" ] && break
        sleep 0.2
    done
    [ -n "$ctrl" ] || { echo "rmq-namesrv $1 did not start"; exit 1; }
    ns_addrs[$1]=$ns; ctrl_addrs[$1]=$ctrl
}
if [ "$controllers" = 1 ]; then
    namesrv_conf "$work/namesrv-0.conf" n0 "n0-127.0.0.1:0" "$work/controller"
    say "starting rmq-namesrv with the embedded Controller"
    start_namesrv 0 "$work/namesrv-0.conf"
else
    read -r -a cports <<<"$(python3 -c '
import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')"
    peers="n0-127.0.0.1:${cports[0]};n1-127.0.0.1:${cports[1]};n2-127.0.0.1:${cports[2]}"
    say "starting three rmq-namesrv, one Raft group of controllers: $peers"
    for i in 0 1 2; do
        namesrv_conf "$work/namesrv-$i.conf" "n$i" "$peers" "$work/controller"
        start_namesrv "$i" "$work/namesrv-$i.conf"
    done
fi
ns_addr=${ns_addrs[0]}
ctrl_addr=$(IFS=';'; echo "${ctrl_addrs[*]}")
ns_list=$(IFS=';'; echo "${ns_addrs[*]}")
say "name server $ns_addr, controller $ctrl_addr"

free_block() { # port: the next block of 1000 up where port-2, port, port+1 are free
    local p=$1
    while in_use "$p" || in_use $((p - 2)) || in_use $((p + 1)); do
        p=$((p + 1000))
        [ "$p" -lt 65000 ] || { echo "no free port block for a broker" >&2; exit 1; }
    done
    echo "$p"
}
port_a=$(free_block "$base_port")
port_b=$(free_block $((port_a + 100)))
addr_a="127.0.0.1:$port_a"
addr_b="127.0.0.1:$port_b"

broker_conf() { # name port
    mkdir -p "$work/home-$1" "$work/store-$1"
    cat >"$work/broker-$1.properties" <<EOF
brokerClusterName=$cluster
brokerName=$broker_name
brokerIP1=127.0.0.1
brokerIP2=127.0.0.1
listenPort=$2
haListenPort=$(($2 + 1))
namesrvAddr=$ns_list
storePathRootDir=$work/store-$1
autoCreateTopicEnable=true
enableControllerMode=true
controllerAddr=$ctrl_addr
EOF
    if [ -n "${RMQ_INTEROP_HB_TIMEOUT:-}" ]; then
        echo "controllerHeartbeatTimeoutMills=$RMQ_INTEROP_HB_TIMEOUT" >>"$work/broker-$1.properties"
    fi
}

last_pid=""
start_broker() { # name (sets last_pid)
    HOME="$work/home-$1" ROCKETMQ_HOME="$work/home-$1" "$broker_bin" \
        -c "$work/broker-$1.properties" -n "$ns_list" >>"$work/broker-$1.log" 2>&1 &
    last_pid=$!
    pids+=("$last_pid")
}

# The controller id of `addr` as the name server routes it ("" when not registered).
routed_id() { # addr
    "$admin" -n "$ns_addr" --json clusterList -c "$cluster" 2>/dev/null | python3 -c '
import json, sys
for r in json.load(sys.stdin):
    if r["brokerName"] == sys.argv[1] and r["brokerAddr"] == sys.argv[2]:
        print(r["brokerId"])' "$broker_name" "$1" 2>/dev/null || true
}

wait_for() { # seconds description command...
    local secs=$1 what=$2; shift 2
    local deadline=$(( $(now_ms) + secs * 1000 ))
    until "$@"; do
        if [ "$(now_ms)" -gt "$deadline" ]; then
            echo "timed out after ${secs}s waiting for: $what"
            return 1
        fi
        sleep 0.2
    done
}

is_routed_as() { [ "$(routed_id "$1")" = "$2" ]; }
is_routed_as_slave() { local id; id=$(routed_id "$1"); [ -n "$id" ] && [ "$id" != 0 ]; }

# Replicas as `id inSync alive role` lines, from the controller.
replicas() {
    "$admin" --json getSyncStateSet -a "$ctrl_addr" -b "$broker_name" 2>/dev/null | python3 -c '
import json, sys
for r in json.load(sys.stdin):
    print(r["brokerId"], r["inSync"], r["alive"], r["role"], r["masterEpoch"], r["brokerAddress"])' 2>/dev/null || true
}
both_in_sync() { [ "$(replicas | grep -c ' True True ')" = 2 ]; }
both_alive() { [ "$(replicas | awk '$3 == "True"' | wc -l)" = 2 ]; }

# Raw remoting frames (JSON header): SEND_MESSAGE to a broker, QUERY_DATA_VERSION to the
# name server. Prints the answer's code (and remark), or the stored stateVersion.
remoting() { # mode addr [args]
    python3 - "$@" <<'PY'
import json, socket, struct, sys, time
mode, addr = sys.argv[1], sys.argv[2]
host, port = addr.rsplit(":", 1)
def call(code, ext, body=b""):
    header = json.dumps({"code": code, "extFields": ext, "flag": 0, "language": "JAVA",
                         "opaque": 1, "serializeTypeCurrentRPC": "JSON", "version": 479}).encode()
    frame = struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(frame)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
            chunk = s.recv(65536)
            if not chunk:
                raise SystemExit("connection closed without an answer")
            data += chunk
    hlen = struct.unpack(">I", data[4:8])[0] & 0xFFFFFF
    return json.loads(data[8:8 + hlen]), data[8 + hlen:]
if mode == "send":
    ext = {"producerGroup": "rmq-interop-producer", "topic": sys.argv[3], "defaultTopic": "TBW102",
           "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
           "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
           "properties": "UNIQ_KEY\u0001rmqinterop%d\u0002" % time.time_ns(),
           "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}
    h, _ = call(10, ext, b"hello from rust-controller.sh")
    print(h.get("code"), h.get("remark") or "")
elif mode == "meta":
    h, _ = call(1005, {})
    print((h.get("extFields") or {}).get("raftServing", ""))
elif mode == "kill-and-time":
    # Signal the master, then poll the route every 2 ms until the new master is id 0.
    import os, signal
    pid, topic, new_master, sig = int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
    t0 = time.monotonic()
    os.kill(pid, getattr(signal, "SIG" + sig))
    while time.monotonic() - t0 < 120:
        h, body = call(105, {"topic": topic})
        if h.get("code") == 0:
            route = json.loads(body)
            if any(b.get("brokerAddrs", {}).get("0") == new_master for b in route.get("brokerDatas", [])):
                print(round((time.monotonic() - t0) * 1000))
                break
        time.sleep(0.002)
    else:
        print("timeout")
elif mode == "state-version":
    cluster, name, broker, bid = sys.argv[3:7]
    ext = {"clusterName": cluster, "brokerName": name, "brokerAddr": broker, "brokerId": bid}
    h, body = call(322, ext, b'{"counter":0,"stateVersion":0,"timestamp":0}')
    print(json.loads(body)["stateVersion"] if h.get("code") == 0 and body else "none")
PY
}
sends_ok() { [ "$(remoting send "$1" ControllerInteropTopic 2>/dev/null | cut -d' ' -f1)" = 0 ]; }
# The serving controller leader's index (1005 raftServing), "" when none.
controller_leader() {
    for i in "${!ctrl_addrs[@]}"; do
        if [ "$(remoting meta "${ctrl_addrs[$i]}" 2>/dev/null)" = true ]; then echo "$i"; return; fi
    done
}
has_controller_leader() { [ -n "$(controller_leader)" ]; }
if [ "$controllers" = 3 ]; then
    # A broker in controller mode gives up its start when no controller answers as leader.
    wait_for 30 "a serving controller leader" has_controller_leader
    say "controller leader: n$(controller_leader)"
fi

broker_conf a "$port_a"
broker_conf b "$port_b"
say "starting broker a ($addr_a) in controller mode"
start_broker a
pid_a=$last_pid
wait_for 180 "broker a routed as master (id 0)" is_routed_as "$addr_a" 0
say "starting broker b ($addr_b) in controller mode"
start_broker b
wait_for 180 "broker b routed as a slave" is_routed_as_slave "$addr_b"
if [ "$unclean" = true ]; then
    say "waiting until both are alive in the controller's view (enableElectUncleanMaster=true)"
    wait_for 180 "both replicas alive" both_alive
else
    say "waiting until both are in the SyncStateSet (the master must widen it with 1001)"
    wait_for 180 "both replicas in sync and alive" both_in_sync
fi
say "the controller's view (id inSync alive role masterEpoch address):"
replicas | sed 's/^/   /'
id_b=$(routed_id "$addr_b")
say "a message to the master: $(remoting send "$addr_a" ControllerInteropTopic 2>&1 || true)"
wait_for 30 "a message accepted by the master" sends_ok "$addr_a"

if [ "$controllers" = 3 ]; then
    wait_for 30 "a serving controller leader" has_controller_leader
    leader=$(controller_leader)
    survivor=$(( (leader + 1) % 3 ))
    ns_addr=${ns_addrs[$survivor]}
    say "SIGKILL the controller leader n$leader (${ctrl_addrs[$leader]}); the route is read from ${ns_addr}"
    kill -9 "${ns_pids[$leader]}"
    wait "${ns_pids[$leader]}" 2>/dev/null || true
    unset 'ns_pids[$leader]' 'ctrl_addrs[$leader]'
    ctrl_addr=$(IFS=';'; echo "${ctrl_addrs[*]}")
    ctrl_t0=$(now_ms)
fi
say "SIG$signal broker a (the master) at $(date +%T.%3N), then poll the route of $broker_name every 2 ms"
t0=$(now_ms)
failover_ms=$(remoting kill-and-time "$ns_addr" "$pid_a" "$broker_name" "$addr_b" "$signal")
[ "$failover_ms" != timeout ] || { echo "broker b was not routed as id 0 within 120 s"; exit 1; }
say "broker b is routed as master $failover_ms ms after the kill"
if [ "$controllers" = 3 ]; then
    wait_for 30 "a serving controller leader among the survivors" has_controller_leader
    say "controller leader now n$(controller_leader) (the old one was killed $(( $(now_ms) - ctrl_t0 )) ms before this line)"
fi

view=$(replicas)
echo "$view" | sed 's/^/   /'
master_line=$(echo "$view" | awk '$4 == "master"')
epoch=$(echo "$master_line" | awk '{print $5}')
[ "$(echo "$master_line" | awk '{print $1}')" = "$id_b" ] || { echo "the controller's master is not b"; exit 1; }
say "the controller: master id $id_b, masterEpoch $epoch"
state_version=$(remoting state-version "$ns_addr" "$cluster" "$broker_name" "$addr_b" 0)
if [ "$state_version" = "$epoch" ]; then
    say "the name server stored stateVersion $state_version = masterEpoch for b as id 0"
else
    # Java brokers bump their topic DataVersion to stateVersion = masterEpoch when they change
    # role; rocketmq-rust 1.0 re-registers with the version it had (the name server stores
    # what it is sent: tests/controller_failover.rs checks that with the stand-in broker).
    say "NOTE: b re-registered as id 0 with stateVersion $state_version, not masterEpoch $epoch (rocketmq-rust 1.0 does not bump it on a role change)"
    [ "${RMQ_INTEROP_STRICT:-0}" = 1 ] && exit 1
fi
"$admin" -n "$ns_addr" topicRoute -t "$broker_name" -l | sed 's/^/   /'

say "the new master takes writes once it holds a write lease (granted 12 s after the change)"
wait_for 60 "a message accepted by the new master" sends_ok "$addr_b"
t2=$(now_ms)
say "accepted $(( (t2 - t0) / 1000 )) s after the signal"

say "rust-controller: all checks passed"
echo "failover (SIG$signal of the master -> former slave routed as id 0): $failover_ms ms"
echo "writes accepted by the new master: $((t2 - t0)) ms after the signal"
