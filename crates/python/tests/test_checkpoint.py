"""Db.checkpoint: a copy of one consistent state, made while another thread writes; a
destination that holds anything is refused untouched."""

import threading

import pytest

import shale
from conftest import SMALL


def test_checkpoint_holds_what_was_written_before_it(db, tmp_path):
    for i in range(1000):
        db.put(b"key%05d" % i, bytes([i % 256]) * (i % 50))
    copy_path = tmp_path / "copy"
    assert db.checkpoint(copy_path) == 1000
    db.put(b"after", b"not in the copy")
    with shale.Db(copy_path, **SMALL) as copy:
        assert copy.get(b"after") is None
        assert list(copy.iterator()) == [
            (b"key%05d" % i, bytes([i % 256]) * (i % 50)) for i in range(1000)
        ]


def test_checkpoint_while_a_thread_writes_holds_a_prefix_of_its_writes(db, tmp_path):
    # The writer puts (b"a", n) then (b"b", n) for n = 1, 2, ...: in any prefix of its
    # writes a is b or one ahead of it, and both only grow.
    acked = [0]
    stop = threading.Event()

    def writer():
        n = 0
        while not stop.is_set():
            n += 1
            db.put(b"a", b"%d" % n)
            db.put(b"b", b"%d" % n)
            acked[0] = n

    t = threading.Thread(target=writer)
    t.start()
    while acked[0] < 100:
        pass
    before = acked[0]
    db.checkpoint(tmp_path / "copy")
    stop.set()
    t.join()
    with shale.Db(tmp_path / "copy", **SMALL) as copy:
        a, b = int(copy.get(b"a")), int(copy.get(b"b"))
    assert a - b in (0, 1), (a, b)
    assert before <= b and a <= acked[0] + 1, (before, a, b, acked[0])


def test_checkpoint_refuses_a_directory_that_holds_anything(db, tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    (full / "theirs").write_bytes(b"keep me")
    with pytest.raises(shale.InvalidArgument, match="not empty"):
        db.checkpoint(full)
    assert (full / "theirs").read_bytes() == b"keep me"
    assert len(list(full.iterdir())) == 1
    a_file = tmp_path / "file"
    a_file.write_bytes(b"a file")
    with pytest.raises(shale.InvalidArgument):
        db.checkpoint(str(a_file))
    assert a_file.read_bytes() == b"a file"


def test_checkpoint_of_a_closed_db_is_refused(db, tmp_path):
    db.close()
    with pytest.raises(shale.Closed):
        db.checkpoint(tmp_path / "copy")
    assert not (tmp_path / "copy").exists()
