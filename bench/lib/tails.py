#!/usr/bin/env python3
"""The tail of every operation type in a run's output, as the shell suites' summaries take it.

Every suite prints, per benchmark or phase and per operation type, p50, p99, p99.9 and max
as the client sees them, in one line (crates/ycsb/src/latency.rs, `ycsb::latency`):

    fillrandom   write latency micros : p50 3.100 p99 12.000 p99.9 40.200 max 812.377 ops 100000

`shale bench --histogram`, `shale ycsb`, `shale kvbench` and the harness's RocksDB YCSB
children print that line themselves. RocksDB's db_bench does not: its own `--histogram=1`
block is read instead, never estimated -

    fillrandom   :       4.123 micros/op 242541 ops/sec ...
    Microseconds per write:
    Count: 1000000 Average: 4.1230  StdDev: 9.01
    Min: 0  Median: 3.1000  Max: 812
    Percentiles: P50: 3.10 P75: 4.20 P99: 12.00 P99.9: 40.20 P99.99: 210.00

- p50, p99 and p99.9 from `Percentiles:`, max from `Max:` (whole microseconds, db_bench's
exact maximum), operations from `Count:`. Where a tool printed the line itself, its line wins
over its own block (three decimals and the histogram shared by every suite).

redis-benchmark (7.x) prints, per test, a summary (`avg min p50 p95 p99 max`, milliseconds)
and its HdrHistogram's percentile distribution; p99.9 is not in the summary, so it is the
value at the first percentile of the distribution at or above 99.9% (99.902% once a test has
1,024 requests or more): an upper bound that passes the true p99.9 by at most 0.002% of the
requests (two in 100,000).

Usage:
    tails.py LOG...                  the tail lines of shale's and db_bench's output
    tails.py --csv LOG               label,op,p50_us,p99_us,p999_us,max_us,ops rows (no header)
    tails.py --redis-benchmark LOG   test,rps,p50_ms,p99_ms,p999_ms,max_ms rows (no header)
    tails.py --self-test             checks the parsers on captured output
"""

import re
import sys

TAIL = re.compile(
    r"^(\S+)\s+(\S+) latency micros : p50 ([0-9.]+) p99 ([0-9.]+) p99\.9 ([0-9.]+) "
    r"max ([0-9.]+) ops ([0-9]+)\s*$"
)
RESULT = re.compile(r"^([a-z0-9_]+)\s+:\s+[0-9.]+ micros/op ")
PER_OP = re.compile(r"^Microseconds per (\S+):\s*$")
COUNT = re.compile(r"^Count: ([0-9]+) ")
MINMAX = re.compile(r"^Min: [0-9.]+\s+Median: [0-9.]+\s+Max: ([0-9.]+)")
PERCENTILES = re.compile(
    r"^Percentiles: P50: ([0-9.]+) P75: [0-9.]+ P99: ([0-9.]+) P99\.9: ([0-9.]+)"
)


def tails(text):
    """(label, op, p50_us, p99_us, p999_us, max_us, ops) per benchmark and operation type,
    in the order of the output."""
    found = {}
    order = []

    def put(key, value, own):
        # A tool's own tail line wins over the figures of its db_bench block.
        if key not in found:
            order.append(key)
        elif not own and found[key][1]:
            return
        found[key] = (value, own)

    last = None  # the benchmark of the last result line
    block = None  # [label, op, count, max] of the db_bench block being read
    for line in text.splitlines():
        m = TAIL.match(line)
        if m:
            label, op = m.group(1), m.group(2)
            nums = tuple(float(m.group(i)) for i in range(3, 7))
            put((label, op), nums + (int(m.group(7)),), True)
            continue
        m = RESULT.match(line)
        if m:
            last, block = m.group(1), None
            continue
        if line.startswith("** "):
            # A statistics dump: its histograms are not a benchmark's.
            last, block = None, None
            continue
        m = PER_OP.match(line)
        if m and last is not None:
            block = [last, m.group(1), None, None]
            continue
        if block is None:
            continue
        m = COUNT.match(line)
        if m:
            block[2] = int(m.group(1))
            continue
        m = MINMAX.match(line)
        if m:
            block[3] = float(m.group(1))
            continue
        m = PERCENTILES.match(line)
        if m and block[2] is not None and block[3] is not None:
            p50, p99, p999 = (float(m.group(i)) for i in (1, 2, 3))
            if block[2] > 0:
                put((block[0], block[1]), (p50, p99, p999, block[3], block[2]), False)
            block = None
    return [k + found[k][0] for k in order]


def line(t):
    """The tail line of one tuple of `tails`."""
    label, op, p50, p99, p999, mx, ops = t
    return (f"{label:<12} {op} latency micros : p50 {p50:.3f} p99 {p99:.3f} "
            f"p99.9 {p999:.3f} max {mx:.3f} ops {ops}")


BLOCK = re.compile(r"====== (.+?) ======")
DIST = re.compile(r"^\s*([0-9.]+)% <= ([0-9.]+) milliseconds")
RPS = re.compile(r"throughput summary: ([0-9.]+) requests per second")


def redis_benchmark(text):
    """(test, rps, p50_ms, p99_ms, p999_ms, max_ms) per test of redis-benchmark's default
    (not --csv, not -q) output."""
    out = []
    test = None
    dist = []
    rps = None
    summary_next = False
    for raw in text.splitlines():
        # Progress lines end in \r, with the next block's title after them.
        for part in raw.split("\r"):
            m = BLOCK.search(part)
            if m:
                test, dist, rps, summary_next = m.group(1), [], None, False
                continue
            if test is None:
                continue
            m = DIST.match(part)
            if m and not part.strip().startswith("latency"):
                dist.append((float(m.group(1)), float(m.group(2))))
                continue
            m = RPS.search(part)
            if m:
                rps = float(m.group(1))
                continue
            words = part.split()
            if words[:6] == ["avg", "min", "p50", "p95", "p99", "max"]:
                summary_next = True
                continue
            if summary_next and len(words) == 6:
                _avg, _mn, p50, _p95, p99, mx = (float(w) for w in words)
                # Only the "Latency by percentile distribution" part lists percentiles in
                # increasing order from 0%; the cumulative part repeats values, so take the
                # first percentile at or above 99.9 of the whole list.
                p999 = next((v for p, v in dist if p >= 99.9), mx)
                out.append((test, rps, p50, p99, min(p999, mx), mx))
                test, summary_next = None, False
    return out


SAMPLE_BENCH = """\
fillrandom   :       4.123 micros/op 242541 ops/sec 4.123 seconds 1000000 operations;   26.8 MB/s
Microseconds per write:
Count: 1000000 Average: 4.1230  StdDev: 9.01
Min: 0  Median: 3.1000  Max: 812
Percentiles: P50: 3.10 P75: 4.20 P99: 12.00 P99.9: 40.20 P99.99: 210.00
------------------------------------------------------
** Compaction Stats [default] **
Microseconds per read:
Count: 5 Average: 1.0  StdDev: 0.00
Min: 1  Median: 1.0000  Max: 1
Percentiles: P50: 1.00 P75: 1.00 P99: 1.00 P99.9: 1.00 P99.99: 1.00
readrandom   :       1.463 micros/op 683322 ops/sec 0.003 seconds 2000 operations;   48.1 MB/s (1272 of 2000 found)
Microseconds per read:
Count: 2000 Average: 1.5  StdDev: 2.00
Min: 1  Median: 1.3000  Max: 117
Percentiles: P50: 1.30 P75: 1.50 P99: 2.16 P99.9: 57.34 P99.99: 116.94
------------------------------------------------------

readrandom   read latency micros : p50 1.302 p99 2.163 p99.9 57.343 max 116.944 ops 2000
run          READ latency micros : p50 3.365 p99 14.423 p99.9 8081.794 max 8081.794 ops 493
"""

SAMPLE_REDIS = (
    " SET: rps=0.0 (overall: -nan) avg_msec=-nan (overall: -nan)\r"
    + """                      ====== SET ======
  2000 requests completed in 0.14 seconds
Latency by percentile distribution:
0.000% <= 0.023 milliseconds (cumulative count 134)
50.000% <= 0.087 milliseconds (cumulative count 1128)
99.805% <= 7.407 milliseconds (cumulative count 1997)
99.902% <= 9.001 milliseconds (cumulative count 1999)
100.000% <= 31.407 milliseconds (cumulative count 2000)

Cumulative distribution of latencies:
61.900% <= 0.103 milliseconds (cumulative count 1238)
100.000% <= 32.111 milliseconds (cumulative count 2000)

Summary:
  throughput summary: 14598.54 requests per second
  latency summary (msec):
          avg       min       p50       p95       p99       max
        0.299     0.016     0.087     0.559     4.327    31.407
====== MSET (10 keys) ======
Latency by percentile distribution:
0.000% <= 0.100 milliseconds (cumulative count 1)
100.000% <= 0.200 milliseconds (cumulative count 2)
Summary:
  throughput summary: 100.00 requests per second
  latency summary (msec):
          avg       min       p50       p95       p99       max
        0.150     0.100     0.100     0.200     0.200     0.200
"""
)


def self_test():
    got = tails(SAMPLE_BENCH)
    assert got == [
        ("fillrandom", "write", 3.10, 12.00, 40.20, 812.0, 1000000),
        ("readrandom", "read", 1.302, 2.163, 57.343, 116.944, 2000),
        ("run", "READ", 3.365, 14.423, 8081.794, 8081.794, 493),
    ], got
    assert line(got[0]) == (
        "fillrandom   write latency micros : p50 3.100 p99 12.000 p99.9 40.200 max 812.000 "
        "ops 1000000"), line(got[0])
    assert tails(line(got[0])) == [got[0]]
    assert tails("") == []
    got = redis_benchmark(SAMPLE_REDIS)
    assert got == [
        ("SET", 14598.54, 0.087, 4.327, 9.001, 31.407),
        ("MSET (10 keys)", 100.0, 0.1, 0.2, 0.2, 0.2),
    ], got
    print("tails.py: self-test passed")


def main(argv):
    if argv[:1] == ["--self-test"]:
        self_test()
        return 0
    if argv[:1] == ["--redis-benchmark"]:
        for path in argv[1:]:
            with open(path, errors="replace") as f:
                for t in redis_benchmark(f.read()):
                    print(",".join([t[0]] + [f"{v:.3f}" for v in t[1:]]))
        return 0
    csv = argv[:1] == ["--csv"]
    for path in argv[1:] if csv else argv:
        with open(path, errors="replace") as f:
            for t in tails(f.read()):
                if csv:
                    print(",".join([t[0], t[1]] + [f"{v:.3f}" for v in t[2:6]] + [str(t[6])]))
                else:
                    print(line(t))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
