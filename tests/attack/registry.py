#!/usr/bin/env python3
"""Attack driver for the registry's guards.

Starts a name server binary, runs one attack against it over loopback, and measures from the
outside: the server's RSS (/proc), what the attack's requests were answered, what the routes
and cluster info show afterwards, and a good client in a separate process asking for a route
100 times a second over its own connection (p50, p99, max, errors). Prints one JSON object. Not part
of `cargo test` (tests/registry_guards.rs holds the bounded versions); run it to compare two
binaries, one after the other, on the same machine:

    tests/attack/registry.py BIN owner|flood|topics217|values|fleets|topiclist|bycluster|bycluster1 [key=value ...]

Extra key=value arguments are passed to the server as --key=value (e.g. brokerAllowList=...).
Peers use three loopback source addresses: the good broker 127.0.0.3, an admin 127.0.0.2,
the attacker 127.0.0.1.
"""

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib

GOOD_BROKER_IP = "127.0.0.3"
ADMIN_IP = "127.0.0.2"
ATTACKER_IP = "127.0.0.1"

# ----------------------------------------------------------------------------- wire


def frame(code, ext=None, body=b"", opaque=1):
    header = {"code": code, "flag": 0, "language": "JAVA", "opaque": opaque, "version": 479}
    if ext:
        header["extFields"] = ext
    h = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack(">II", 4 + len(h) + len(body), len(h)) + h + body


def read_frame(sock):
    def exact(n):
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = sock.recv_into(view[got:])
            if not k:
                raise ConnectionError("closed")
            got += k
        return bytes(buf)

    length, word = struct.unpack(">II", exact(8))
    rest = exact(length - 4)
    hlen = word & 0xFFFFFF
    return json.loads(rest[:hlen]), rest[hlen:]


class Conn:
    def __init__(self, addr, source_ip):
        self.sock = socket.create_connection(addr, timeout=30, source_address=(source_ip, 0))
        self.opaque = 0

    def call(self, code, ext=None, body=b""):
        self.opaque += 1
        self.sock.sendall(frame(code, ext, body, self.opaque))
        return read_frame(self.sock)

    def pipeline(self, frames, depth=64):
        """Sends (code, ext, body) requests keeping `depth` in flight; returns the codes."""
        codes = []
        sent = 0
        while len(codes) < len(frames):
            while sent < len(frames) and sent - len(codes) < depth:
                code, ext, body = frames[sent]
                self.opaque += 1
                self.sock.sendall(frame(code, ext, body, self.opaque))
                sent += 1
            header, _ = read_frame(self.sock)
            codes.append(header["code"])
        return codes

    def close(self):
        self.sock.close()


def topic_json(name, perm=6, read=8, write=8):
    return {"attributes": {}, "order": False, "perm": perm, "readQueueNums": read,
            "topicFilterType": "SINGLE_TAG", "topicName": name, "topicSysFlag": 0,
            "writeQueueNums": write}


def json_body(topics, counter=1):
    table = {t["topicName"]: t for t in topics}
    version = {"counter": counter, "stateVersion": 0, "timestamp": 1700000000000 + counter}
    body = {"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": version, "topicConfigTable": table}}
    return json.dumps(body, separators=(",", ":")).encode()


def compressed_body(names, counter=1):
    """The 5.x compressed layout (docs/protocol.md §4.2), zlib at best compression."""
    def part(b):
        return struct.pack(">i", len(b)) + b
    version = json.dumps({"counter": counter, "stateVersion": 0,
                          "timestamp": 1700000000000 + counter}).encode()
    out = part(version) + struct.pack(">i", len(names))
    for n in names:
        out += part(f"{n} 8 8 6 SINGLE_TAG {{}}".encode())
    out += part(b"[]") + struct.pack(">i", 0)
    return zlib.compress(out, 9)


def broker_ext(name, addr, cluster="C", broker_id=0, timeout_ms=None, compressed=False):
    ext = {"brokerName": name, "brokerAddr": addr, "clusterName": cluster,
           "haServerAddr": addr.rsplit(":", 1)[0] + ":10912", "brokerId": str(broker_id),
           "enableActingMaster": "false", "compressed": "true" if compressed else "false",
           "bodyCrc32": "0"}
    if timeout_ms:
        ext["heartbeatTimeoutMillis"] = str(timeout_ms)
    return ext


# ----------------------------------------------------------------------------- server


class Server:
    def __init__(self, binary, extra):
        self.dir = tempfile.mkdtemp(prefix="rmq-registry-attack-")
        args = [binary, "--listenPort=0", "--bindAddress=127.0.0.1", "--logPath=",
                f"--kvConfigPath={self.dir}/kv.json"] + [f"--{kv}" for kv in extra]
        # In its own directory: a ./namesrv.conf where this runs must not be read or written.
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     cwd=self.dir)
        line = self.proc.stdout.readline().decode().strip()
        host, port = line.rsplit(" ", 1)[1].rsplit(":", 1)
        self.addr = (host, int(port))

    def rss_mib(self, field="VmRSS"):
        """Resident MiB now, or at its peak with field="VmHWM"."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return round(int(line.split()[1]) / 1024, 1)
        return None

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


def stats(addr):
    c = Conn(addr, ADMIN_IP)
    header, body = c.call(29001)
    c.close()
    return json.loads(body) if header["code"] == 0 else {}


def route(conn, topic):
    header, body = conn.call(105, {"topic": topic})
    return json.loads(body) if header["code"] == 0 else None


def cluster_info(addr):
    c = Conn(addr, ADMIN_IP)
    header, body = c.call(106)
    c.close()
    # Legacy dialect: integer keys unquoted.
    text = body.decode()
    import re
    text = re.sub(r"([{,])(-?\d+):", r'\1"\2":', text)
    return json.loads(text)


def wait_until(cond, timeout=60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


# ----------------------------------------------------------------------------- good peers


class GoodBroker:
    """broker-good at 10.9.9.9:10911 serving GOOD, re-registering every 5 s from 127.0.0.3."""

    def __init__(self, addr):
        self.conn = Conn(addr, GOOD_BROKER_IP)
        self.ext = broker_ext("broker-good", "10.9.9.9:10911", cluster="GoodCluster")
        self.body = json_body([topic_json("GOOD")])
        self.code = self.register()
        self.stop_flag = False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def register(self):
        return self.conn.call(103, self.ext, self.body)[0]["code"]

    def loop(self):
        while not self.stop_flag:
            time.sleep(5)
            try:
                self.register()
            except OSError:
                return


def good_client(host, port, seconds):
    """Runs in its own process: GET_ROUTEINFO_BY_TOPIC GOOD 100 times a second."""
    stopped = []
    signal.signal(signal.SIGINT, lambda *_: stopped.append(True))
    conn = Conn((host, int(port)), ADMIN_IP)
    latencies, errors = [], 0
    end = time.time() + float(seconds)
    while time.time() < end and not stopped:
        start = time.perf_counter()
        try:
            header, _ = conn.call(105, {"topic": "GOOD"})
            if header["code"] != 0:
                errors += 1
        except OSError:
            errors += 1
            conn = Conn((host, int(port)), ADMIN_IP)
        latencies.append((time.perf_counter() - start) * 1000)
        time.sleep(max(0.0, 0.01 - (time.perf_counter() - start)))
    latencies.sort()
    p50 = latencies[len(latencies) // 2] if latencies else None
    p99 = latencies[int(len(latencies) * 0.99) - 1] if latencies else None
    print(json.dumps({"requests": len(latencies), "errors": errors, "p50_ms": round(p50, 2),
                      "p99_ms": round(p99, 2), "max_ms": round(latencies[-1], 2)}))


class GoodClient:
    def __init__(self, addr, seconds):
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "good-client", addr[0], str(addr[1]), str(seconds)],
            stdout=subprocess.PIPE)

    def result(self):
        out, _ = self.proc.communicate(timeout=600)
        return json.loads(out)


# ----------------------------------------------------------------------------- attacks


def attack_owner(server):
    """Point 4: an attacker at 127.0.0.1 against broker-a (registered from 127.0.0.3)."""
    addr = server.addr
    result = {}
    broker = Conn(addr, GOOD_BROKER_IP)
    ext = broker_ext("broker-a", "10.0.0.1:10911")
    result["good_register"] = broker.call(103, ext, json_body([topic_json("T")]))[0]["code"]
    reader = Conn(addr, ADMIN_IP)
    attacker = Conn(addr, ATTACKER_IP)
    # 1. re-registration under the live broker's name/id/address with perm 4
    h, _ = attacker.call(103, ext, json_body([topic_json("T", perm=4)], counter=2))
    result["spoof_register"] = h["code"]
    r = route(reader, "T")
    result["perm_after_spoof"] = r["queueDatas"][0]["perm"] if r else None
    # 2. id 1 at an address of the attacker's choosing
    h, _ = attacker.call(103, broker_ext("broker-a", "6.6.6.6:10911", broker_id=1),
                         json_body([topic_json("T")]))
    result["inject_register"] = h["code"]
    r = route(reader, "T")
    result["addrs_after_inject"] = r["brokerDatas"][0]["brokerAddrs"] if r else None
    # 3. the attacker's connection closes while the real broker is still connected
    attacker.close()
    time.sleep(1.0)
    result["route_after_attacker_closes"] = route(reader, "T") is not None
    # 4. UNREGISTER_BROKER from another connection
    broker.call(103, ext, json_body([topic_json("T")], counter=3))
    attacker = Conn(addr, ATTACKER_IP)
    h, _ = attacker.call(104, {"brokerName": "broker-a", "brokerAddr": "10.0.0.1:10911",
                               "clusterName": "C", "brokerId": "0"})
    result["unregister"] = [h["code"], h.get("remark")]
    time.sleep(1.0)
    result["route_after_unregister"] = route(reader, "T") is not None
    return result


def register_fleet(addr, count, per_broker, tag, timeout_ms=None):
    conns, codes = [], []
    for i in range(count):
        c = Conn(addr, ATTACKER_IP)
        names = [f"{tag}{i}-{j:06d}" for j in range(per_broker)]
        body = compressed_body(names)
        ext = broker_ext(f"{tag}-b{i}", f"10.66.{i // 250}.{i % 250}:10911", compressed=True,
                         timeout_ms=timeout_ms)
        codes.append(c.call(103, ext, body)[0]["code"])
        conns.append(c)
    return conns, codes


def attack_flood(server, per_broker=50_000):
    """Point 5: fake brokers with many topics each (compressed), then they leave. The number
    of fake brokers is $RMQ_ATTACK_BROKERS (default 10)."""
    brokers = int(os.environ.get("RMQ_ATTACK_BROKERS", "10"))
    addr = server.addr
    result = {"rss_before_mib": server.rss_mib()}
    start = time.time()
    conns, codes = register_fleet(addr, brokers, per_broker, "fake")
    result["register_seconds"] = round(time.time() - start, 1)
    result["register_codes"] = {str(c): codes.count(c) for c in set(codes)}
    s = stats(addr)
    result["topics"] = s.get("topics")
    result["rss_full_mib"] = server.rss_mib()
    c = Conn(addr, ADMIN_IP)
    h, body = c.call(206)
    result["all_topic_list_bytes"] = len(body)
    c.close()
    for c in conns:
        c.close()
    wait_until(lambda: stats(addr).get("topics", 0) <= 1, timeout=300)
    time.sleep(3)
    result["rss_after_leave_mib"] = server.rss_mib()
    return result


def attack_topics217(server, count=200_000):
    """Point 5: REGISTER_TOPIC_IN_NAMESRV floods one broker group with new topics."""
    addr = server.addr
    result = {"rss_before_mib": server.rss_mib()}
    owner = Conn(addr, ATTACKER_IP)
    owner.call(103, broker_ext("flood-b", "10.77.0.1:10911"), json_body([]))
    c = Conn(addr, ATTACKER_IP)
    frames = []
    for i in range(count):
        body = json.dumps({"queueDatas": [{"brokerName": "flood-b", "perm": 6, "readQueueNums": 8,
                                           "topicSysFlag": 0, "writeQueueNums": 8}]}).encode()
        frames.append((217, {"topic": f"flood-{i:07d}"}, body))
    start = time.time()
    codes = c.pipeline(frames)
    elapsed = time.time() - start
    result["codes"] = {str(k): codes.count(k) for k in set(codes)}
    result["rate_per_s"] = round(count / elapsed)
    result["topics"] = stats(addr).get("topics")
    result["rss_full_mib"] = server.rss_mib()
    owner.close()
    wait_until(lambda: stats(addr).get("topics", 0) <= 1, timeout=300)
    time.sleep(3)
    result["rss_after_leave_mib"] = server.rss_mib()
    return result


def attack_values(server):
    """Point 8: values that hurt clients, at the wire."""
    addr = server.addr
    attacker = Conn(addr, ATTACKER_IP)
    result = {}
    owner = Conn(addr, ATTACKER_IP)
    owner.call(103, broker_ext("vals-b", "10.88.0.1:10911"), json_body([topic_json("V")]))
    q = {"brokerName": "vals-b", "perm": 6, "readQueueNums": -1, "topicSysFlag": 0,
         "writeQueueNums": 2147483647}
    h, _ = attacker.call(217, {"topic": "Bad217"}, json.dumps({"queueDatas": [q]}).encode())
    result["217_queue_nums"] = [h["code"], h.get("remark")]
    cases = {
        "perm_-1": (broker_ext("p1", "10.88.0.2:10911"), [topic_json("P1", perm=-1)]),
        "perm_255": (broker_ext("p2", "10.88.0.3:10911"), [topic_json("P2", perm=255)]),
        "empty_cluster": (broker_ext("e1", "10.88.0.4:10911", cluster=""), [topic_json("E1")]),
        "empty_broker": (broker_ext("", "10.88.0.5:10911"), [topic_json("E2")]),
        "addr_separators": (broker_ext("sep", '6.6.6.6:10911,"\0'), [topic_json("S1")]),
    }
    for key, (ext, topics) in cases.items():
        h, _ = attacker.call(103, ext, json_body(topics))
        result[key] = [h["code"], h.get("remark")]
    reader = Conn(addr, ADMIN_IP)
    result["routes_present"] = [t for t in ["Bad217", "P1", "P2", "E1", "E2", "S1"]
                                if route(reader, t) is not None]
    result["good_route_V"] = route(reader, "V")["queueDatas"][0]
    return result


def attack_fleets(server, addresses=100, generations=20):
    """Point 9: hosts redeployed under new names at the same addresses (one connection per
    address), then everybody goes silent and expires."""
    addr = server.addr
    result = {"rss_before_mib": server.rss_mib()}
    conns = [Conn(addr, ATTACKER_IP) for _ in range(addresses)]
    for g in range(generations):
        for i, c in enumerate(conns):
            ext = broker_ext(f"host{i}-gen{g}", f"10.99.0.{i}:10911", cluster="Soak",
                             timeout_ms=3000)
            c.call(103, ext, json_body([topic_json(f"t-{i}-{g}"), topic_json("Shared")]))
    info = cluster_info(addr)
    result["groups_while_live"] = len(info.get("brokerAddrTable", {}))
    result["rss_live_mib"] = server.rss_mib()
    # Silence: every broker expires (heartbeat timeout 3 s).
    wait_until(lambda: stats(addr).get("brokers", 0) <= 1, timeout=120)
    time.sleep(2)
    info = cluster_info(addr)
    groups = [g for g in info.get("brokerAddrTable", {}) if g != "broker-good"]
    result["orphan_groups_after_expiry"] = len(groups)
    result["topics_after_expiry"] = stats(addr).get("topics", 0) - 1
    result["rss_after_expiry_mib"] = server.rss_mib()
    for c in conns:
        try:
            c.close()
        except OSError:
            pass
    return result


def list_phase(addr, code, seconds, connections=4):
    """`connections` peers asking `code` back to back for `seconds`, a good client measured
    meanwhile in its own process."""
    long_turns = stats(addr).get("longTurns")
    client = GoodClient(addr, seconds)
    answers, sizes = [], []

    def ask():
        c = Conn(addr, ATTACKER_IP)
        end, n = time.time() + seconds, 0
        while time.time() < end:
            h, body = c.call(code)
            n += 1
            sizes.append(len(body))
        answers.append(n)
        c.close()

    threads = [threading.Thread(target=ask) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    good = client.result()
    long_turns = (stats(addr).get("longTurns") or 0) - (long_turns or 0)
    return {"answers": sum(answers), "body_bytes": max(sizes, default=0),
            "good_client": good, "long_turns": long_turns}


def attack_topiclist(server, seconds=20):
    """999,000 topics in ten compressed registrations, then GET_ALL_TOPIC_LIST (206) and
    GET_UNIT_TOPIC_LIST (311) from 4 connections each, the good client measured per phase."""
    addr = server.addr
    start = time.time()
    # They never re-register: no expiry during the measurement.
    conns, codes = register_fleet(addr, 10, 99_900, "tl", timeout_ms=3_600_000)
    wait_until(lambda: stats(addr).get("topics", 0) >= 999_000, timeout=600)
    result = {"register_seconds": round(time.time() - start, 1),
              "register_codes": {str(c): codes.count(c) for c in set(codes)},
              "topics": stats(addr).get("topics"), "rss_full_mib": server.rss_mib()}
    result["idle"] = list_phase(addr, 105, 5, connections=0)
    result["206"] = list_phase(addr, 206, seconds)
    result["311"] = list_phase(addr, 311, seconds)
    s = stats(addr)
    result.update({k: s.get(k) for k in ["maxTurnMicros", "longTurns", "topicListShardsEncoded",
                                         "topicListBytes"]})
    for c in conns:
        c.close()
    return result


def attack_bycluster(server, groups=10, per_group=99_900):
    """`groups` compressed registrations of `per_group` topics in cluster C, then
    GET_TOPICS_BY_CLUSTER (224) asked three times in a row, each timed, with the loop's
    longest turn (`maxTurnMicros`) before and after the asks."""
    addr = server.addr
    conns, codes = register_fleet(addr, groups, per_group, "bc", timeout_ms=3_600_000)
    total = groups * per_group
    wait_until(lambda: stats(addr).get("topics", 0) >= total, timeout=600)
    before = stats(addr)
    asker, asks = Conn(addr, ATTACKER_IP), []
    for _ in range(3):
        start = time.time()
        header, body = asker.call(224, {"cluster": "C"})
        asks.append({"code": header["code"], "ms": round((time.time() - start) * 1000, 1),
                     "body_bytes": len(body)})
    after = stats(addr)
    for c in conns + [asker]:
        c.close()
    return {"topics": after.get("topics"), "asks": asks,
            "maxTurnMicros_before": before.get("maxTurnMicros"),
            "maxTurnMicros_after": after.get("maxTurnMicros"),
            "long_turns_in_asks": after.get("longTurns", 0) - before.get("longTurns", 0)}


ATTACKS = {"topiclist": attack_topiclist,
           "bycluster": attack_bycluster,
           "bycluster1": lambda server: attack_bycluster(server, groups=1), "owner": attack_owner, "flood": attack_flood, "topics217": attack_topics217,
           "values": attack_values, "fleets": attack_fleets}


def main():
    if sys.argv[1] == "good-client":
        good_client(*sys.argv[2:5])
        return
    binary, name, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    if name == "fleets":
        extra = ["scanNotActiveBrokerInterval=500"] + extra
    if name in ("topiclist", "bycluster", "bycluster1"):
        # The fake brokers' connections stay idle: they must not be closed (and unregistered).
        extra = ["serverChannelMaxIdleTimeSeconds=3600"] + extra
    server = Server(binary, extra)
    try:
        good = GoodBroker(server.addr)
        client = GoodClient(server.addr, 1_000_000)  # stopped below
        time.sleep(1)
        result = {"attack": name, "binary": binary, "extra": extra,
                  "good_broker_register": good.code}
        result.update(ATTACKS[name](server))
        client.proc.send_signal(signal.SIGINT)
        good.stop_flag = True
        try:
            result["good_client"] = client.result()
        except (ValueError, subprocess.TimeoutExpired):
            result["good_client"] = None
        result["rss_end_mib"] = server.rss_mib()
    finally:
        server.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
