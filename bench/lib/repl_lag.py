#!/usr/bin/env python3
"""A replica's lag behind its master while a load runs, and its catch-up after it
(bench/replication.sh, part b; issue #46's "a replica keeps up with a master taking 100k
SET/s").

It starts the load command (redis-benchmark), and every INTERVAL seconds while it runs asks
the replica and then the master `INFO replication` over one connection each: the lag is the
master's `master_repl_offset` less the replica's `slave_repl_offset`, in bytes of the
replication stream. The replica is asked first, so a sample's lag can include what the master
wrote between the two answers (a loopback round trip): an upper bound. (Asked the other way
round, a replica close behind reads ahead of the master's older answer.) Once the load exits, the
master's offset is read once more (the stream's end: nothing else writes) and both are polled
every 10 ms until the replica's offset reaches it, for at most 120 s; the catch-up time runs
from the load's exit to the first poll that finds the replica there.

Usage:
    repl_lag.py MASTER_PORT REPLICA_PORT SAMPLES_CSV -- LOAD_COMMAND...
Writes the samples (t_s,master_offset,replica_offset,lag_bytes) to SAMPLES_CSV and one line
to stdout:
    samples,max_lag_bytes,median_lag_bytes,first_half_max_bytes,second_half_max_bytes,
    load_s,end_offset,catch_up_s
where the halves are of the load's time (a lag that grows without bound shows as a second
half's max well above the first's), and catch_up_s is "never" when the replica did not reach the end within 120 s. The load's
own output goes to this script's stderr unless redirected inside LOAD_COMMAND.
"""

import socket
import statistics
import subprocess
import sys
import time

INTERVAL = 0.1


class Conn:
    """One connection speaking just enough RESP to read a bulk-string reply."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def info_replication(self):
        self.sock.sendall(b"*2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n")
        head = self._line()
        if not head.startswith(b"$"):
            raise ValueError(f"INFO answered {head!r}")
        n = int(head[1:])
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        body, self.buf = self.buf[:n], self.buf[n + 2:]
        fields = {}
        for line in body.decode().split("\r\n"):
            if ":" in line:
                k, v = line.split(":", 1)
                fields[k] = v
        return fields


def offsets(master, replica):
    r = int(replica.info_replication()["slave_repl_offset"])
    m = int(master.info_replication()["master_repl_offset"])
    return m, r


def main(argv):
    if len(argv) < 5 or argv[3] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    master, replica = Conn(int(argv[0])), Conn(int(argv[1]))
    samples_path, load = argv[2], argv[4:]
    samples = []
    start = time.monotonic()
    proc = subprocess.Popen(load, stdin=subprocess.DEVNULL)
    next_at = start
    while proc.poll() is None:
        m, r = offsets(master, replica)
        samples.append((time.monotonic() - start, m, r, m - r))
        next_at += INTERVAL
        time.sleep(max(0.0, next_at - time.monotonic()))
    ended = time.monotonic()
    if proc.returncode != 0:
        print(f"the load exited with {proc.returncode}", file=sys.stderr)
        return 1
    end_offset = int(master.info_replication()["master_repl_offset"])
    catch_up = "never"
    while time.monotonic() - ended < 120:
        r = int(replica.info_replication()["slave_repl_offset"])
        now = time.monotonic()
        if r >= end_offset:
            catch_up = f"{now - ended:.3f}"
            break
        samples.append((now - start, end_offset, r, end_offset - r))
        time.sleep(0.01)
    with open(samples_path, "w") as f:
        f.write("t_s,master_offset,replica_offset,lag_bytes\n")
        for t, m, r, lag in samples:
            f.write(f"{t:.3f},{m},{r},{lag}\n")
    load_s = ended - start
    during = [lag for t, _, _, lag in samples if t <= load_s] or [0]
    first = [lag for t, _, _, lag in samples if t <= load_s / 2] or [0]
    second = [lag for t, _, _, lag in samples if load_s / 2 < t <= load_s] or [0]
    print(f"{len(during)},{max(during)},{statistics.median(during):.0f},{max(first)},"
          f"{max(second)},{load_s:.3f},{end_offset},{catch_up}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
