#!/usr/bin/env python3
"""Adds the read columns (p50_read_us, p99_read_us, p999_read_us, max_read_us) to this run's
runs.csv from each process's own output (raw/<log>.stdout), as `shale-compare adoc-record`
records them since this run: the run was made by a harness that recorded the writes' tail
only. p99 and p99.9 from the report's [READ] lines, p50 and max from its READ tail line.

Usage: add_read_tails.py runs.csv   (rewrites it in place; the raw outputs must be there)
"""
import re
import sys
from pathlib import Path

COLUMNS = ["p50_read_us", "p99_read_us", "p999_read_us", "max_read_us"]


def read_tail(stdout: str):
    p99 = re.search(r"^\[READ\], 99thPercentileLatency\(us\), ([0-9.]+)$", stdout, re.M)
    p999 = re.search(r"^\[READ\], 99\.9PercentileLatency\(us\), ([0-9.]+)$", stdout, re.M)
    line = re.search(r"\bREAD latency micros : p50 ([0-9.]+) .* max ([0-9.]+) ops ([0-9]+)", stdout)
    if not (p99 and p999 and line) or int(line.group(3)) == 0:
        return ["", "", "", ""]
    return [line.group(1), p99.group(1), p999.group(1), line.group(2)]


def main(csv_path: str) -> None:
    csv = Path(csv_path)
    lines = csv.read_text().splitlines()
    header = lines[0].split(",")
    if COLUMNS[0] in header:
        sys.exit(f"{csv} has its read columns already")
    log = header.index("log")
    out = [",".join(header + COLUMNS)]
    for line in lines[1:]:
        fields = line.split(",")
        stdout = csv.parent / (fields[log] + ".stdout")
        tail = read_tail(stdout.read_text()) if stdout.exists() else ["", "", "", ""]
        out.append(",".join(fields + tail))
    csv.write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
