"""Issue #41's first finding, as a Python user met it: a process put 10,000 keys without sync
and died (os._exit), the store directory was copied (`cp -a`), the copy was opened and closed,
and the original then opened with 0 keys: the copy had replayed and removed the original's
WAL tail in /dev/shm. Now the tail belongs to one store instance (its volume file), so the
copy leaves it alone and the original keeps every acknowledged write."""

import os
import subprocess
import sys

import shale
from conftest import SMALL

KEYS = 10_000

WRITER = """
import os, sys
import shale
db = shale.Db(sys.argv[1], write_buffer_size={wbs}, block_cache_size={bcs})
for i in range({keys}):
    db.put(b"key%06d" % i, b"value%06d" % i)
os._exit(0)  # a crash: no close, no flush
"""


def count(path):
    with shale.Db(path, create_if_missing=False, **SMALL) as db:
        return sum(1 for _ in db.iterator())


def test_a_copy_of_a_crashed_store_leaves_the_original_its_unsynced_writes(tmp_path):
    original, copy = tmp_path / "pyA", tmp_path / "pyB"
    # A memtable larger than the data: every write stays unsynced, in the memtable and the
    # WAL tail, when the process dies.
    script = WRITER.format(wbs=64 << 20, bcs=SMALL["block_cache_size"], keys=KEYS)
    subprocess.run([sys.executable, "-c", script, str(original)], check=True)
    # The usual reflex after a crash (the volume file is sparse: copy it as such).
    subprocess.run(["cp", "-a", "--sparse=always", str(original), str(copy)], check=True)
    copied = count(copy)
    assert 0 <= copied <= KEYS
    assert count(original) == KEYS, "the original lost writes it acknowledged"


def test_a_renamed_crashed_store_keeps_its_unsynced_writes(tmp_path):
    original, moved = tmp_path / "before", tmp_path / "after"
    script = WRITER.format(wbs=64 << 20, bcs=SMALL["block_cache_size"], keys=1000)
    subprocess.run([sys.executable, "-c", script, str(original)], check=True)
    os.rename(original, moved)
    assert count(moved) == 1000
