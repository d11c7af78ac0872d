"""Issue #41's matrix for the Python package: `shale.Db` given a store of the hash or the
table engine, or a foreign file, raises `shale.NotAStore` and leaves every byte as it was; a
checkpoint into any of them is refused, untouched; the hash and table stores then still open,
with what they held, through the `shale` tool.

The hash and table stores are made by the `shale` command-line tool (the package speaks the
lsm engine only), built here with cargo's test profile (a `cargo test --workspace` run, as CI
makes before these tests, has built it already). A missing cargo fails these tests: they
never skip."""

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

import shale
from conftest import SMALL

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def shale_tool():
    out = subprocess.run(
        ["cargo", "build", "--profile", "test", "-p", "shale-cli", "--bin", "shale",
         "--message-format=json-render-diagnostics"],
        cwd=REPO, check=True, stdout=subprocess.PIPE, text=True,
    ).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            if msg["target"]["name"] == "shale":
                return msg["executable"]
    raise AssertionError("cargo built no `shale` executable")


def run(tool, *args):
    done = subprocess.run([tool, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 0, f"shale {' '.join(args)}: {done.stderr}"
    return done.stdout


def make(tool, kind, path):
    if kind == "hash":
        run(tool, "kvbench", "--engine", "hash", "--paths", str(path), "--num", "100",
            "--value_size", "100", "--workloads", "seqfill")
    else:
        run(tool, "ycsb", "--engine", "table", "--phase", "load", f"--db={path}",
            "--records=100")


def fingerprint(path):
    """Every file under `path` (or `path` itself) with a digest of its bytes."""
    path = Path(path)
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    result = []
    for f in files:
        h = hashlib.blake2b()
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        result.append((str(f), os.path.getsize(f), h.hexdigest()))
    return result


@pytest.mark.parametrize("kind", ["hash", "table"])
def test_another_engines_store_is_refused_untouched(shale_tool, tmp_path, kind):
    store = tmp_path / kind
    make(shale_tool, kind, store)
    before = fingerprint(store)
    for create in (True, False):
        with pytest.raises(shale.NotAStore) as refused:
            shale.Db(store, create_if_missing=create, **SMALL)
        assert kind in str(refused.value), str(refused.value)
        assert fingerprint(store) == before
    # A checkpoint of an lsm store into it is refused too, untouched.
    with shale.Db(tmp_path / "lsm", **SMALL) as db:
        db.put(b"k", b"v")
        with pytest.raises(shale.Error):
            db.checkpoint(store)
    assert fingerprint(store) == before
    # Its own engine still opens it with what it held.
    out = run(shale_tool, "check", str(store))
    assert "ok" in out.lower() or kind in out, out


def test_a_foreign_file_is_refused_untouched(tmp_path):
    junk = bytes((i * 2654435761 >> 13) & 0xFF for i in range(1 << 16)) * 16
    as_file = tmp_path / "foreign-file"
    as_file.write_bytes(junk)
    as_dir = tmp_path / "foreign-dir"
    as_dir.mkdir()
    (as_dir / "volume.shale").write_bytes(junk)
    for path in (as_file, as_dir):
        before = fingerprint(path)
        with pytest.raises(shale.NotAStore):
            shale.Db(path, **SMALL)
        assert fingerprint(path) == before
