#!/usr/bin/env python3
"""Put and get loops through shale's Python package against RocksDict (the rocksdict wheel).

Each engine gets a fresh store in a temporary directory, N puts of 16-byte keys and 100-byte
random values in a shuffled order, then N gets of every key in another shuffled order, from
one Python thread calling the bound method in a plain loop. Both keep their defaults where
they share an option (64 MiB write buffer, WAL on, no sync; RocksDict in raw mode, so bytes
go in and out as they are). The engines alternate, RUNS times each; the medians and the
ratio shale / RocksDict are printed, and each operation's latency as the caller sees it (p50,
p99, p99.9 and max per run, in the suites' tail-line format, and their medians).

    target/python-venv/bin/pip install rocksdict
    target/python-venv/bin/python bench/python/bench_rocksdict.py [--keys N] [--runs R] [--dir D]
"""

import argparse
import importlib.metadata
import random
import shutil
import statistics
import sys
import tempfile
import time

import rocksdict
import shale

KEY_BYTES = 16
VALUE_BYTES = 100


class Shale:
    name = "shale"

    def __init__(self, path):
        self.db = shale.Db(path)
        self.put = self.db.put
        self.get = self.db.get

    def close(self):
        self.db.close()


class RocksDict:
    name = "rocksdict"

    def __init__(self, path):
        self.db = rocksdict.Rdict(path, options=rocksdict.Options(raw_mode=True))
        self.put = self.db.put
        self.get = self.db.get

    def close(self):
        self.db.close()


def put_loop(engine, keys, values, latencies):
    """Puts every key; each call's time in nanoseconds goes to `latencies` (the clock's two
    reads, about 0.1 us a call, are in the loop's time for both engines alike)."""
    put = engine.put
    now = time.perf_counter_ns
    record = latencies.append
    start = time.perf_counter()
    for k, v in zip(keys, values):
        t = now()
        put(k, v)
        record(now() - t)
    return time.perf_counter() - start


def get_loop(engine, keys, latencies):
    get = engine.get
    now = time.perf_counter_ns
    record = latencies.append
    missing = 0
    start = time.perf_counter()
    for k in keys:
        t = now()
        v = get(k)
        record(now() - t)
        if v is None:
            missing += 1
    elapsed = time.perf_counter() - start
    if missing:
        sys.exit(f"{engine.name}: {missing} of {len(keys)} keys missing")
    return elapsed


def tail(latencies):
    """p50, p99, p99.9 and max of `latencies` (nanoseconds), in microseconds."""
    ordered = sorted(latencies)
    n = len(ordered)
    at = lambda q: ordered[min(n - 1, int(q * n))] / 1000
    return [at(0.50), at(0.99), at(0.999), ordered[-1] / 1000]


def tail_line(label, op, figures, ops):
    """The suites' tail line (crates/ycsb/src/latency.rs's format)."""
    p50, p99, p999, top = figures
    return (f"{label} {op} latency micros : p50 {p50:.3f} p99 {p99:.3f} p99.9 {p999:.3f} "
            f"max {top:.3f} ops {ops}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the stores go (default: a temp dir)")
    args = ap.parse_args()

    rng = random.Random(301)
    keys = [b"%016d" % i for i in range(args.keys)]
    rng.shuffle(keys)
    values = [rng.randbytes(VALUE_BYTES) for _ in range(args.keys)]
    read_order = keys[:]
    rng.shuffle(read_order)
    assert all(len(k) == KEY_BYTES for k in keys)

    print(f"keys={args.keys} key_bytes={KEY_BYTES} value_bytes={VALUE_BYTES} runs={args.runs}")
    print(f"shale {shale.__version__}, rocksdict {importlib.metadata.version('rocksdict')}, "
          f"python {sys.version.split()[0]}")
    results = {"shale": {"put": [], "get": []}, "rocksdict": {"put": [], "get": []}}
    tails = {"shale": {"put": [], "get": []}, "rocksdict": {"put": [], "get": []}}
    for run in range(args.runs):
        order = [Shale, RocksDict] if run % 2 == 0 else [RocksDict, Shale]
        for cls in order:
            tmp = tempfile.mkdtemp(prefix=f"bench-{cls.name}-", dir=args.dir)
            try:
                engine = cls(tmp + "/store")
                put_lat, get_lat = [], []
                put_s = put_loop(engine, keys, values, put_lat)
                get_s = get_loop(engine, read_order, get_lat)
                engine.close()
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            put_ops, get_ops = args.keys / put_s, args.keys / get_s
            results[cls.name]["put"].append(put_ops)
            results[cls.name]["get"].append(get_ops)
            print(f"run {run + 1} {cls.name:9s} put {put_ops:10.0f} ops/s   get {get_ops:10.0f} ops/s",
                  flush=True)
            for op, lat in (("put", put_lat), ("get", get_lat)):
                figures = tail(lat)
                tails[cls.name][op].append(figures)
                print(tail_line(f"run {run + 1} {cls.name}", op, figures, len(lat)), flush=True)

    print()
    print(f"{'':4s}{'shale ops/s':>14s}{'rocksdict ops/s':>18s}{'ratio':>8s}  (medians of {args.runs})")
    for op in ["put", "get"]:
        s = statistics.median(results["shale"][op])
        r = statistics.median(results["rocksdict"][op])
        print(f"{op:4s}{s:14.0f}{r:18.0f}{s / r:8.2f}x  "
              f"({1e6 / s:.2f} vs {1e6 / r:.2f} micros/op)")
    print()
    print(f"latency as the client sees it, micros: p50 / p99 / p99.9 / max, each the median of {args.runs} runs")
    for op in ["put", "get"]:
        cells = []
        for name in ["shale", "rocksdict"]:
            runs = tails[name][op]
            figures = [statistics.median(r[i] for r in runs) for i in range(4)]
            cells.append(" / ".join(f"{f:.1f}" for f in figures))
        s99 = statistics.median(r[1] for r in tails["shale"][op])
        r99 = statistics.median(r[1] for r in tails["rocksdict"][op])
        print(f"{op:4s} shale {cells[0]}   rocksdict {cells[1]}   p99 ratio {s99 / r99:.2f}x")


if __name__ == "__main__":
    main()
