#!/usr/bin/env python3
"""Drives the official RocketMQ C++ client (librocketmq.so from the PyPI wheel
rocketmq==0.4.4) for tests/interop_cpp.rs.

usage: cpp_client.py NAMESRV_ADDR produce TOPIC COUNT BODY
       cpp_client.py NAMESRV_ADDR consume TOPIC GROUP

Every line meant for the test starts with "RESULT " followed by space-separated
key=value pairs; anything else on stdout/stderr is diagnostics.

produce: sends COUNT messages synchronously and prints one RESULT line per send
         (status=OK/... or error=<message>).
consume: starts a clustering push consumer subscribed to TOPIC, prints
         "RESULT started=1", then keeps it running until stdin is closed, shuts it
         down and prints "RESULT stopped=1".
"""
import sys

from rocketmq.client import Message, Producer, PushConsumer


def say(**fields):
    print("RESULT " + " ".join("%s=%s" % (k, str(v).replace(" ", "_")) for k, v in fields.items()),
          flush=True)


def produce(namesrv, topic, count, body):
    producer = Producer("PID_RMQ_NAMESRV_INTEROP", timeout=3000)
    producer.set_namesrv_addr(namesrv)
    producer.start()
    try:
        for i in range(count):
            msg = Message(topic)
            msg.set_keys("key-%d" % i)
            msg.set_tags("interop")
            msg.set_body("%s-%d" % (body, i))
            try:
                res = producer.send_sync(msg)
                say(seq=i, status=res.status.name, offset=res.offset, msg_id=res.msg_id)
            except Exception as e:  # the client's error text is what the test checks
                say(seq=i, error=type(e).__name__, message=str(e).splitlines()[0] if str(e) else "")
    finally:
        producer.shutdown()


def consume(namesrv, topic, group):
    consumer = PushConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    consumer.set_thread_count(1)
    consumer.subscribe(topic, lambda msg: None)
    consumer.start()
    say(started=1)
    try:
        sys.stdin.read()  # the test closes stdin when it has seen what it needs
    finally:
        consumer.shutdown()
    say(stopped=1)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    namesrv, scenario = argv[1], argv[2]
    if scenario == "produce" and len(argv) == 6:
        produce(namesrv, argv[3], int(argv[4]), argv[5])
    elif scenario == "consume" and len(argv) == 5:
        consume(namesrv, argv[3], argv[4])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
