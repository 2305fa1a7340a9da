#!/usr/bin/env python3
"""Attack driver for large request bodies (no request holds the loop).

Starts a name server binary and sends it, from one attacker connection, one kind of large
body a few times (each waits for its answer), while a good client in a separate process asks
for a route 100 times a second over its own connection. Prints one JSON object: what the
attacker was answered and how long each answer took, the good client's p99, max and errors,
and the server's `maxTurnMicros` / `longTurns` (absent in builds before they existed). Not part
of `cargo test` (tests/decode_worker.rs holds the bounded version); run it to compare two
binaries, one after the other, on the same machine:

    tests/attack/bodies.py BIN bomb|json|register|topic217|grow|drop|hostile [key=value ...]

* bomb: a compressed registration of 64 MiB of zeros (a 65 KB zlib stream), 5 times;
* json: a 15 MiB JSON registration refused after decoding (its last topic has perm 255), 5 times;
* register: valid 70,000-topic JSON registrations (12 MB), 3 brokers;
* topic217: REGISTER_TOPIC_IN_NAMESRV with a 15 MiB TopicRouteData, 3 times;
* grow: valid 70,000-topic registrations of 4 brokers (280,000 topics), with `maxTurnMicros`
  after each (the topic table grows past 57,344, 114,688 and 229,376 topics on the way);
* drop: with deleteTopicWithBrokerRegistration=true, a broker of 20,000 topics re-registers
  with one (its 19,999 other topics' queue entries go);
* hostile: 16 MiB bodies of shapes no broker sends (nesting 60 deep, long escaped strings, one
  number of 16 M digits, millions of floats), each as a registration and as a 217 body.

Extra key=value arguments are passed to the server as --key=value.
"""

import json
import os
import signal
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import registry  # noqa: E402  (the wire helpers and the good client)
from registry import Conn, GoodClient, Server, broker_ext, json_body, topic_json  # noqa: E402

ATTACKER_IP = registry.ATTACKER_IP


def timed(conn, code, ext, body):
    start = time.perf_counter()
    header, _ = conn.call(code, ext, body)
    return {"code": header["code"], "remark": (header.get("remark") or "")[:80],
            "ms": round((time.perf_counter() - start) * 1000, 1)}


def attack_bomb(server):
    bomb = zlib.compress(bytes(64 << 20), 9)
    conn = Conn(server.addr, ATTACKER_IP)
    ext = broker_ext("bomb", "10.6.6.6:10911", compressed=True)
    return [timed(conn, 103, ext, bomb) for _ in range(5)]


def attack_json(server):
    topics = [topic_json(f"Huge-{i:06}") for i in range(80_000)]
    topics.append(topic_json("Last", perm=255))
    body = json_body(topics)
    conn = Conn(server.addr, ATTACKER_IP)
    ext = broker_ext("huge", "10.6.6.7:10911")
    return [dict(timed(conn, 103, ext, body), bytes=len(body)) for _ in range(5)]


def attack_register(server):
    out = []
    for b in range(3):
        body = json_body([topic_json(f"B{b}-{i:06}") for i in range(70_000)])
        conn = Conn(server.addr, ATTACKER_IP)
        ext = broker_ext(f"big-{b}", f"10.6.7.{b}:10911")
        out.append(dict(timed(conn, 103, ext, body), bytes=len(body)))
        # Kept open: the broker's routes stay while its connection does.
        server.keep = getattr(server, "keep", []) + [conn]
    return out


def attack_topic217(server):
    datas = [{"brokerAddrs": {"0": f"10.0.{i // 250}.{i % 250}:10911"},
              "brokerName": f"broker-{i}", "cluster": "C", "enableActingMaster": False}
             for i in range(150_000)]
    body = json.dumps({"brokerDatas": datas, "queueDatas": []}, separators=(",", ":")).encode()
    conn = Conn(server.addr, ATTACKER_IP)
    return [dict(timed(conn, 217, {"topic": "Route217"}, body), bytes=len(body))
            for _ in range(3)]


def attack_grow(server):
    out = []
    for b in range(4):
        body = json_body([topic_json(f"G{b}-{i:06}") for i in range(70_000)])
        conn = Conn(server.addr, ATTACKER_IP)
        ext = broker_ext(f"grow-{b}", f"10.6.8.{b}:10911")
        answer = timed(conn, 103, ext, body)
        s = registry.stats(server.addr)
        out.append(dict(answer, topics=s.get("topics"), maxTurnMicros=s.get("maxTurnMicros")))
        server.keep = getattr(server, "keep", []) + [conn]
    return out


def attack_drop(server):
    conn = Conn(server.addr, ATTACKER_IP)
    ext = broker_ext("drop", "10.6.9.1:10911")
    out = [timed(conn, 103, ext, json_body([topic_json(f"D-{i:06}") for i in range(20_000)]))]
    out[0]["maxTurnMicros"] = registry.stats(server.addr).get("maxTurnMicros")
    out.append(timed(conn, 103, ext, json_body([topic_json("D-000007")], counter=2)))
    out[1]["topics"] = registry.stats(server.addr).get("topics")
    server.keep = [conn]
    return out


HOSTILE_MIB = 31 << 19  # under frameMaxLength with the header


def hostile_values():
    """(name, JSON value text of about 16 MiB) per shape."""
    nest = "[" * 60 + "]" * 60
    escaped = '"' + "\\u0041" * 10_000 + '"'
    return [("nest", "[" + ",".join([nest] * (HOSTILE_MIB // 121)) + "]"),
            ("escapes", "[" + ",".join([escaped] * (HOSTILE_MIB // 60_001)) + "]"),
            ("digits", "1" * HOSTILE_MIB),
            ("floats", "[" + ",".join(["1.25e-7"] * (HOSTILE_MIB // 8)) + "]")]


def attack_hostile(server):
    out = []
    conn = Conn(server.addr, ATTACKER_IP)
    for shape, value in hostile_values():
        register = ('{"filterServerList":[],"x":' + value + "}").encode()
        route217 = ('{"brokerDatas":[],"queueDatas":[],"x":' + value + "}").encode()
        for code, ext, body in ((103, broker_ext("hostile", "10.6.6.8:10911"), register),
                                (217, {"topic": "Hostile"}, route217)):
            try:
                out.append(dict(timed(conn, code, ext, body), shape=shape, request=code))
            except OSError as e:
                out.append({"shape": shape, "request": code, "error": str(e)})
                conn = Conn(server.addr, ATTACKER_IP)
    return out


ATTACKS = {"bomb": attack_bomb, "json": attack_json, "register": attack_register,
           "topic217": attack_topic217, "grow": attack_grow, "drop": attack_drop,
           "hostile": attack_hostile}


def main():
    binary, name, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    server = Server(binary, extra)
    try:
        good = registry.GoodBroker(server.addr)
        good.stop_flag = True
        client = GoodClient(server.addr, 1_000_000)  # stopped below
        time.sleep(1)
        result = {"attack": name, "binary": binary, "extra": extra}
        result["answers"] = ATTACKS[name](server)
        time.sleep(1)
        client.proc.send_signal(signal.SIGINT)
        result["good_client"] = client.result()
        s = registry.stats(server.addr)
        result["maxTurnMicros"] = s.get("maxTurnMicros")
        result["longTurns"] = s.get("longTurns")
        result["rss_end_mib"] = server.rss_mib()
        result["rss_peak_mib"] = server.rss_mib("VmHWM")
    finally:
        server.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
