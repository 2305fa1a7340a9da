#!/usr/bin/env python3
"""Attack driver for rmq-namesrv's hardening figures (descriptors, partial frames, unread replies, trickling peers).

Starts a name server binary, runs one attack against it over loopback, and measures from the
outside: the server's RSS and address space (/proc), and a good client in a separate process
that opens a fresh connection per request (so it also needs a connection slot) and asks for a
route ten times a second. Prints one JSON object. Not part of `cargo test` (the bounded
versions of these attacks are tests/attacks.rs); run it to compare two binaries:

    tests/attack/attack.py BIN fd|bigframes|stalled|noread|trickle|kv [server args...]

`kv` takes its size from the environment: KV_PUTS (635), KV_VALUE_KIB (60), KV_CONNS (1).

The figures depend on the machine (loopback socket buffers, other load): compare binaries
measured on the same machine, one after the other.
"""

import json
import os
import resource
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from registry import frame, json_body, read_frame, topic_json  # noqa: E402  (the wire helpers)

ATTACKER_IP = "127.0.0.2"  # attackers' source address; the good client uses 127.0.0.1


# ----------------------------------------------------------------------------- wire


def register_body(topics):
    return json_body([topic_json(name) for name in topics])


def register(addr, topics):
    s = socket.create_connection(addr, timeout=10)
    ext = {"brokerName": "attack-b", "brokerAddr": "127.0.0.1:10911", "clusterName": "C",
           "haServerAddr": "127.0.0.1:10912", "brokerId": "0", "compressed": "false",
           "bodyCrc32": "0"}
    s.sendall(frame(103, ext, register_body(topics)))
    header, _ = read_frame(s)
    assert header["code"] == 0, header
    # Kept open: a broker's routes go when its connection closes.
    return s


# ----------------------------------------------------------------------------- server


def start_server(binary, args, nofile=None):
    def limit():
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    tmp = tempfile.mkdtemp(prefix="attack-")
    cmd = [binary, "--bindAddress=0.0.0.0", "--listenPort=0", f"--logPath={tmp}/ns.log",
           f"--kvConfigPath={tmp}/kv.json", f"--configStorePath={tmp}/ns.properties"] + args
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, preexec_fn=limit)
    line = proc.stdout.readline().decode()
    port = int(line.strip().rsplit(":", 1)[1])
    return proc, ("127.0.0.1", port), tmp


def proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmSize:")):
                    out[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        pass
    return out


class Sampler(threading.Thread):
    """RSS/VmSize every 100 ms; peak and the latest value."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak_rss, self.peak_vm, self.stop = pid, 0, 0, False

    def run(self):
        while not self.stop:
            s = proc_status(self.pid)
            self.peak_rss = max(self.peak_rss, s.get("VmRSS", 0))
            self.peak_vm = max(self.peak_vm, s.get("VmSize", 0))
            time.sleep(0.1)


# ----------------------------------------------------------------------------- good client


def probe_main(host, port, seconds, topic):
    """Child process: a fresh connection per request, 10 requests a second, for `seconds` or
    until SIGTERM."""
    latencies, errors = [], 0
    end = time.time() + seconds
    stopped = []
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(1))
    print("ready", flush=True)  # start_probe waits for this: SIGTERM from now on gets figures
    opaque = 0
    while time.time() < end and not stopped:
        started = time.time()
        opaque += 1
        try:
            s = socket.create_connection((host, port), timeout=3)
            s.settimeout(3)
            s.sendall(frame(105, {"topic": topic}, opaque=opaque))
            header, _ = read_frame(s)
            s.close()
            if header.get("code") not in (0, 17):
                errors += 1
            else:
                latencies.append((time.time() - started) * 1000)
        except (OSError, ConnectionError, ValueError):
            errors += 1
        time.sleep(max(0, 0.1 - (time.time() - started)))
    latencies.sort()

    def pct(p):
        return round(latencies[min(len(latencies) - 1, int(len(latencies) * p))], 1) if latencies else None

    print(json.dumps({"ok": len(latencies), "errors": errors, "p50_ms": pct(0.5),
                      "p99_ms": pct(0.99), "max_ms": round(latencies[-1], 1) if latencies else None}))


def start_probe(addr, seconds, topic="TopicA"):
    """The good client in a child process, returned once its SIGTERM handler is in place (a
    SIGTERM before that would kill it without its figures)."""
    p = subprocess.Popen([sys.executable, __file__, "probe", addr[0], str(addr[1]),
                          str(seconds), topic], stdout=subprocess.PIPE)
    assert p.stdout.readline() == b"ready\n", "probe did not start"
    return p


def probe_result(p):
    out, _ = p.communicate()
    return json.loads(out.decode())


def attacker_socket(addr, blocking=False):
    s = socket.socket()
    s.bind((ATTACKER_IP, 0))
    # Short: a listener that stopped accepting lets connects hang until the queue is full.
    s.settimeout(0.5)
    s.connect(addr)
    s.setblocking(blocking)
    return s


def wind_down(proc, sampler, probe, socks, idle):
    """The end of an RSS attack: RSS with the attackers still connected, close them, the good
    client's figures, RSS 10 s later (is the memory given back?), stop the server."""
    during = proc_status(proc.pid)
    for s in socks:
        s.close()
    good = probe_result(probe)
    time.sleep(10)
    after = proc_status(proc.pid)
    sampler.stop = True
    proc.kill()
    return {"idle_rss_kib": idle.get("VmRSS"), "peak_rss_kib": sampler.peak_rss,
            "rss_during_kib": during.get("VmRSS"), "rss_10s_after_kib": after.get("VmRSS"),
            "good_client": good}


# ----------------------------------------------------------------------------- attacks


def attack_fd(binary):
    """ulimit -n 64, 300 connection attempts held for 5 s, then gone: is the server still
    accepting?"""
    proc, addr, _ = start_server(binary, [], nofile=64)
    broker = register(addr, ["TopicA"])
    held = []
    for _ in range(300):
        try:
            held.append(attacker_socket(addr))
        except OSError:
            pass
    time.sleep(5)
    for s in held:
        s.close()
    time.sleep(1)
    probe = start_probe(addr, 20)
    good = probe_result(probe)
    proc.kill()
    return {"attempts": 300, "connected": len(held), "after_attack_good_client": good}


def push_partial_frames(addr, conns, announced, send_each, hold_s, sampler):
    socks = []
    for _ in range(conns):
        try:
            s = attacker_socket(addr)
            s.send(struct.pack(">II", announced - 4, 100))
            socks.append([s, send_each])
        except OSError:
            pass
    chunk = b"x" * 65536
    end = time.time() + hold_s
    sel = selectors.DefaultSelector()
    for entry in socks:
        sel.register(entry[0], selectors.EVENT_WRITE, entry)
    while time.time() < end:
        for key, _ in sel.select(timeout=0.2):
            entry = key.data
            try:
                n = entry[0].send(chunk[:min(len(chunk), entry[1])])
                entry[1] -= n
            except OSError:
                entry[1] = 0
            if entry[1] <= 0:
                sel.unregister(entry[0])
    sent = sum(send_each - max(e[1], 0) for e in socks)
    return socks, sent


def attack_bigframes(binary, extra):
    """200 connections each send 8 MB of a 16 MB frame and hold it for 10 s."""
    proc, addr, _ = start_server(binary, extra)
    broker = register(addr, ["TopicA"])
    time.sleep(0.5)
    idle = proc_status(proc.pid)
    sampler = Sampler(proc.pid)
    sampler.start()
    probe = start_probe(addr, 14)
    time.sleep(1)
    socks, sent = push_partial_frames(addr, 200, 16 << 20, 8 << 20, 12, sampler)
    result = wind_down(proc, sampler, probe, [s for s, _ in socks], idle)
    return {**result, "bytes_sent_by_attackers": sent}


def attack_stalled(binary, extra):
    """1,000 connections announce a 16 MB frame and send 8 bytes: address space reserved."""
    proc, addr, _ = start_server(binary, extra)
    time.sleep(0.3)
    idle = proc_status(proc.pid)
    socks = []
    for _ in range(1000):
        try:
            s = attacker_socket(addr)
            s.send(struct.pack(">II", (16 << 20) - 4, 100))
            socks.append(s)
        except OSError:
            pass
    time.sleep(3)
    during = proc_status(proc.pid)
    for s in socks:
        s.close()
    proc.kill()
    return {"idle": idle, "with_1000_stalled": during, "connected": len(socks)}


def attack_noread(binary, extra):
    """200 connections ask for the all-topic list (about 220 KB) again and again and never
    read the answers."""
    proc, addr, _ = start_server(binary, extra)
    broker = register(addr, [f"attack-topic-{i:08d}" for i in range(10_000)] + ["TopicA"])
    time.sleep(0.5)
    idle = proc_status(proc.pid)
    sampler = Sampler(proc.pid)
    sampler.start()
    probe = start_probe(addr, 16)
    time.sleep(1)
    request = b"".join(frame(206, opaque=i) for i in range(50))
    socks = []
    for _ in range(200):
        try:
            s = attacker_socket(addr)
            socks.append(s)
        except OSError:
            pass
    end = time.time() + 12
    while time.time() < end:
        for s in socks:
            try:
                s.send(request)
            except OSError:
                pass
        time.sleep(0.2)
    return wind_down(proc, sampler, probe, socks, idle)


def attack_trickle(binary, extra):
    """maxConnections=100, idle 3 s: 150 connections (as many as get in, reconnecting when
    closed) send one byte every 1.5 s. The good client had been working before."""
    proc, addr, _ = start_server(binary, ["--maxConnections=100",
                                          "--serverChannelMaxIdleTimeSeconds=3"] + extra)
    broker = register(addr, ["TopicA"])
    warm = start_probe(addr, 2)
    probe_result(warm)
    stop = time.time() + 25
    probe = None
    socks = [None] * 150
    started = time.time()
    while time.time() < stop:
        for i, s in enumerate(socks):
            try:
                if s is None:
                    s = attacker_socket(addr, blocking=True)
                    socks[i] = s
                s.send(b"\x00")
            except OSError:
                if s is not None:
                    s.close()
                socks[i] = None
        if probe is None and time.time() - started > 3:
            probe = start_probe(addr, 20)
        time.sleep(1.5)
    good = probe_result(probe)
    proc.kill()
    return {"good_client_during_attack": good}


def attack_kv(binary, extra):
    """KV_CONNS connections each put KV_PUTS / KV_CONNS values of KV_VALUE_KIB under new keys,
    one at a time (each waits for its answer), while the good client asks for routes."""
    puts = int(os.environ.get("KV_PUTS", "635"))
    value = b"v" * (int(os.environ.get("KV_VALUE_KIB", "60")) * 1024)
    conns = int(os.environ.get("KV_CONNS", "1"))
    proc, addr, tmp = start_server(binary, extra)
    broker = register(addr, ["TopicA"])
    sampler = Sampler(proc.pid)
    sampler.start()
    probe = start_probe(addr, 1)
    probe_result(probe)
    results = [[] for _ in range(conns)]

    def writer(n, out):
        s = socket.create_connection(addr)
        for i in range(puts // conns):
            ext = {"namespace": "ATTACK", "key": f"k-{n}-{i:06d}", "value": value.decode()}
            started = time.time()
            s.sendall(frame(100, ext, opaque=i + 1))
            header, _ = read_frame(s)
            out.append((header.get("code"), (time.time() - started) * 1000))
        s.close()

    probe = start_probe(addr, 3600)
    threads = [threading.Thread(target=writer, args=(n, results[n])) for n in range(conns)]
    started = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.time() - started
    probe.terminate()
    during = probe_result(probe)
    quiet = probe_result(start_probe(addr, 2))
    sampler.stop = True
    all_puts = [r for rs in results for r in rs]
    codes = {}
    for code, _ in all_puts:
        codes[str(code)] = codes.get(str(code), 0) + 1
    ok = [ms for code, ms in all_puts if code == 0]
    first, last = ok[: max(1, len(ok) // 20)], ok[-max(1, len(ok) // 20):]
    size = os.path.getsize(f"{tmp}/kv.json") if os.path.exists(f"{tmp}/kv.json") else 0
    proc.kill()
    return {"puts": len(all_puts), "codes": codes, "seconds": round(took, 1),
            "put_ms_first_5pct": round(sum(first) / len(first), 1) if ok else None,
            "put_ms_last_5pct": round(sum(last) / len(last), 1) if ok else None,
            "kv_file_bytes": size, "peak_rss_kib": sampler.peak_rss,
            "good_client_during": during,
            "good_client_after": quiet}


def main():
    if sys.argv[1] == "probe":
        probe_main(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
        return
    binary, scenario = sys.argv[1], sys.argv[2]
    extra = sys.argv[3:]
    result = {
        "fd": lambda: attack_fd(binary),
        "bigframes": lambda: attack_bigframes(binary, extra),
        "stalled": lambda: attack_stalled(binary, extra),
        "noread": lambda: attack_noread(binary, extra),
        "trickle": lambda: attack_trickle(binary, extra),
        "kv": lambda: attack_kv(binary, extra),
    }[scenario]()
    print(json.dumps({"binary": binary, "scenario": scenario, **result}))


if __name__ == "__main__":
    main()
