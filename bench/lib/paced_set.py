#!/usr/bin/env python3
"""SETs at a fixed rate (bench/replication.sh, part b): the master "taking 100k SET/s" of
issue #46's replica target, which redis-benchmark cannot hold (it has no rate limit: it
drives a server as fast as it goes).

Every 10 ms it sends each of CONNS connections its share of the tick's SETs, pipelined, with
keys drawn uniformly from KEYS (`key:%012d`, redis-benchmark's `-r` keys) and 3-byte values
(redis-benchmark's default), and reads whatever replies have come; after SECONDS it waits for
the last reply. A tick that starts late is not made up for beyond the batch due now, so a
server that cannot take RATE shows as a lower achieved rate, never a burst.

Usage:
    paced_set.py PORT RATE SECONDS [CONNS=10] [KEYS=100000]
Prints one line: sent,replies,errors,seconds,achieved_rate
"""

import random
import selectors
import socket
import sys
import time

TICK = 0.01


def command(key):
    k = b"key:%012d" % key
    return b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$3\r\nxxx\r\n" % (len(k), k)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    port, rate, seconds = int(argv[0]), float(argv[1]), float(argv[2])
    conns = int(argv[3]) if len(argv) > 3 else 10
    keys = int(argv[4]) if len(argv) > 4 else 100000
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(conns)]
    sel = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    # Batches are made ahead (drawing keys costs more than sending them): enough of them to
    # draw about KEYS keys, 64 to 4096, sent in turn.
    per_batch = max(1, round(rate * TICK / conns))
    rng = random.Random(46)
    batches = min(4096, max(64, -(-keys // per_batch)))
    pool = [b"".join(command(rng.randrange(keys)) for _ in range(per_batch))
            for _ in range(batches)]
    sent = replies = errors = 0
    pending = {s: b"" for s in socks}
    outbox = {s: b"" for s in socks}

    def drain(timeout):
        nonlocal replies, errors
        for key, _ in sel.select(timeout):
            s = key.fileobj
            try:
                data = s.recv(1 << 20)
            except BlockingIOError:
                continue
            if not data:
                raise ConnectionError("the server closed a connection")
            buf = pending[s] + data
            # Every reply to SET is one line: +OK or an error.
            lines = buf.split(b"\r\n")
            pending[s] = lines.pop()
            for line in lines:
                replies += 1
                if not line.startswith(b"+OK"):
                    errors += 1

    def flush():
        for s in socks:
            if outbox[s]:
                try:
                    n = s.send(outbox[s])
                except BlockingIOError:
                    n = 0
                outbox[s] = outbox[s][n:]

    start = time.monotonic()
    tick = 0
    while True:
        now = time.monotonic()
        if now - start >= seconds:
            break
        due = start + tick * TICK
        if now >= due:
            for i, s in enumerate(socks):
                outbox[s] += pool[(tick + i) % len(pool)]
            sent += per_batch * conns
            tick += 1
            # A late tick is not made up for: the schedule moves on from now.
            if now - due > TICK:
                tick = int((now - start) / TICK) + 1
        flush()
        drain(max(0.0, min(TICK, start + tick * TICK - time.monotonic())))
    while replies < sent:
        flush()
        drain(1.0)
        if time.monotonic() - start > seconds + 120:
            break
    elapsed = time.monotonic() - start
    print(f"{sent},{replies},{errors},{elapsed:.3f},{replies / elapsed:.0f}")
    return 0 if replies == sent and errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
