"""shale.Db's API: every method, context managers, errors, iteration, snapshots, threads."""

import threading

import pytest

import shale
from conftest import SMALL


def test_put_get_delete(db):
    assert db.get(b"missing") is None
    db.put(b"apple", b"red")
    assert db.get(b"apple") == b"red"
    db.put(b"apple", b"green")
    assert db.get(b"apple") == b"green"
    db.delete(b"apple")
    assert db.get(b"apple") is None
    db.delete(b"never-written")  # deleting a missing key is no error


def test_empty_key_and_value_are_values(db):
    db.put(b"", b"")
    assert db.get(b"") == b""
    db.put(b"k", b"")
    assert db.get(b"k") == b""


def test_values_come_back_as_bytes(db):
    db.put(bytearray(b"k"), memoryview(b"v"))
    value = db.get(b"k")
    assert type(value) is bytes and value == b"v"
    assert all(type(x) is bytes for pair in db.iterator() for x in pair)


def test_bytearray_and_memoryview_inputs(db):
    db.put(bytearray(b"ba"), bytearray(b"1"))
    db.put(memoryview(b"mv"), memoryview(b"2"))
    db.put(memoryview(b"xxsliced")[2:], b"3")
    assert db.get(b"ba") == b"1"
    assert db.get(bytearray(b"mv")) == b"2"
    assert db.get(memoryview(b"sliced")) == b"3"
    db.delete(bytearray(b"ba"))
    assert db.get(b"ba") is None
    assert list(db.iterator(prefix=bytearray(b"m"))) == [(b"mv", b"2")]


def test_a_bytearray_changed_after_put_does_not_change_the_value(db):
    value = bytearray(b"before")
    db.put(b"k", value)
    value[:] = b"after!"
    assert db.get(b"k") == b"before"


@pytest.mark.parametrize("bad", ["text", 1, None, 1.5, [1, 2]])
def test_keys_and_values_that_are_not_bytes_raise_type_error(db, bad):
    with pytest.raises(TypeError, match="key must be bytes"):
        db.put(bad, b"v")
    with pytest.raises(TypeError, match="value must be bytes"):
        db.put(b"k", bad)
    with pytest.raises(TypeError):
        db.get(bad)
    with pytest.raises(TypeError):
        db.delete(bad)
    with pytest.raises(TypeError):
        db.write_batch().put(bad, b"v")


def test_an_oversized_key_raises_invalid_argument(db):
    with pytest.raises(shale.InvalidArgument) as err:
        db.put(b"k" * (64 * 1024 + 1), b"v")
    assert isinstance(err.value, shale.Error)
    assert db.get(b"k") is None


def test_exception_classes_derive_from_shale_error():
    for name in [
        "InvalidArgument", "Corruption", "IoError", "NoSpace", "Busy", "InUse", "Stopped",
        "ReadOnly", "Closed",
    ]:
        cls = getattr(shale, name)
        assert issubclass(cls, shale.Error), name
    assert issubclass(shale.Error, Exception)
    assert shale.Error.__module__ == "shale"


def test_a_second_open_of_one_store_raises_in_use(db, path):
    with pytest.raises(shale.InUse):
        shale.Db(path, **SMALL)


def test_create_if_missing_false_refuses_a_missing_path(tmp_path):
    with pytest.raises(shale.InvalidArgument, match="does not exist"):
        shale.Db(tmp_path / "nowhere", create_if_missing=False)


def test_bad_options_raise_invalid_argument(tmp_path):
    with pytest.raises(shale.InvalidArgument):
        shale.Db(tmp_path / "s", write_buffer_size=1)
    with pytest.raises(shale.InvalidArgument):
        shale.Db("")


def test_a_foreign_file_is_refused(tmp_path):
    junk = tmp_path / "junk"
    junk.write_bytes(b"not a volume" * 1000)
    with pytest.raises(shale.Error):
        shale.Db(junk, create_if_missing=False)


def test_reopen_keeps_the_data(path):
    with shale.Db(path, **SMALL) as db:
        for i in range(2000):
            db.put(b"key%05d" % i, b"value%d" % i)
        db.delete(b"key00007")
    with shale.Db.open(path, create_if_missing=False, **SMALL) as db:
        assert db.get(b"key01999") == b"value1999"
        assert db.get(b"key00007") is None
        assert sum(1 for _ in db.iterator()) == 1999


def test_sync_writes(path):
    with shale.Db(path, sync=True, **SMALL) as db:
        db.put(b"a", b"1")
        db.put(b"b", b"2", sync=False)
        db.delete(b"a", sync=True)
        assert db.get(b"b") == b"2"


def test_context_manager_closes(path):
    with shale.Db(path, **SMALL) as db:
        db.put(b"k", b"v")
        assert not db.closed
    assert db.closed
    assert "closed" in repr(db)


def test_context_manager_closes_on_an_exception(path):
    with pytest.raises(RuntimeError):
        with shale.Db(path, **SMALL) as db:
            db.put(b"k", b"v")
            raise RuntimeError("boom")
    assert db.closed
    with shale.Db(path, **SMALL) as again:
        assert again.get(b"k") == b"v"


def test_a_closed_db_raises_closed(db):
    db.close()
    db.close()  # a second close does nothing
    for call in [
        lambda: db.put(b"k", b"v"),
        lambda: db.get(b"k"),
        lambda: db.delete(b"k"),
        lambda: db.iterator(),
        lambda: db.snapshot(),
        lambda: db.write_batch(),
        lambda: db.write(shale.WriteBatch()),
        lambda: db.flush(),
    ]:
        with pytest.raises(shale.Closed, match="is closed"):
            call()


def test_write_batch_is_atomic_and_ordered(db):
    db.put(b"gone", b"x")
    batch = shale.WriteBatch()
    batch.put(b"a", b"1")
    batch.put(b"b", b"2")
    batch.delete(b"gone")
    batch.put(b"a", b"3")  # the later operation wins
    assert len(batch) == 4
    db.write(batch)
    assert (db.get(b"a"), db.get(b"b"), db.get(b"gone")) == (b"3", b"2", None)
    batch.clear()
    assert len(batch) == 0


def test_write_batch_context_manager_commits_on_exit(db):
    with db.write_batch() as batch:
        batch.put(b"x", b"1")
        batch.put(b"y", b"2")
        assert db.get(b"x") is None  # nothing is written before the block ends
    assert db.get(b"x") == b"1" and db.get(b"y") == b"2"
    assert len(batch) == 0


def test_write_batch_context_manager_discards_on_an_exception(db):
    with pytest.raises(KeyError):
        with db.write_batch(sync=True) as batch:
            batch.put(b"x", b"1")
            raise KeyError("abandon")
    assert db.get(b"x") is None


def test_a_standalone_batch_in_a_with_block_has_no_store(db):
    with pytest.raises(shale.InvalidArgument, match="no store"):
        with shale.WriteBatch() as batch:
            batch.put(b"x", b"1")


def test_an_oversized_key_in_a_batch_fails_the_whole_batch(db):
    batch = db.write_batch()
    batch.put(b"ok", b"1")
    batch.put(b"k" * (64 * 1024 + 1), b"v")
    with pytest.raises(shale.InvalidArgument):
        db.write(batch)
    assert db.get(b"ok") is None


def fill(db, keys):
    for k in keys:
        db.put(k, b"v-" + k)


def test_iterator_forward_and_reverse(db):
    keys = [b"a", b"b", b"c", b"d"]
    fill(db, reversed(keys))
    assert [k for k, _ in db.iterator()] == keys
    assert [k for k, _ in db.iterator(reverse=True)] == keys[::-1]
    assert dict(db.iterator()) == {k: b"v-" + k for k in keys}


def test_iterator_bounds(db):
    fill(db, [b"a", b"b", b"c", b"d", b"e"])
    assert [k for k, _ in db.iterator(lower=b"b", upper=b"d")] == [b"b", b"c"]
    assert [k for k, _ in db.iterator(lower=b"b", upper=b"d", reverse=True)] == [b"c", b"b"]
    assert [k for k, _ in db.iterator(lower=b"bb")] == [b"c", b"d", b"e"]
    assert [k for k, _ in db.iterator(upper=b"c", reverse=True)] == [b"b", b"a"]
    assert list(db.iterator(lower=b"x")) == []
    assert list(db.iterator(lower=b"c", upper=b"c")) == []


def test_iterator_prefix(db):
    fill(db, [b"fruit/apple", b"fruit/pear", b"fruits", b"veg/leek", b"fruit"])
    assert [k for k, _ in db.iterator(prefix=b"fruit/")] == [b"fruit/apple", b"fruit/pear"]
    assert [k for k, _ in db.iterator(prefix=b"fruit/", reverse=True)] == [
        b"fruit/pear", b"fruit/apple"
    ]
    assert list(db.iterator(prefix=b"nothing/")) == []
    with pytest.raises(shale.InvalidArgument):
        db.iterator(prefix=b"f", lower=b"a")


def test_prefix_of_ff_bytes_reverse(db):
    fill(db, [b"\xff", b"\xff\xff", b"\xff\xff\x01", b"\xfe"])
    assert [k for k, _ in db.iterator(prefix=b"\xff\xff", reverse=True)] == [
        b"\xff\xff\x01", b"\xff\xff"
    ]


def test_iterator_across_flushed_data_and_memtable(db):
    for i in range(5000):
        db.put(b"k%06d" % i, b"x" * 50)
    db.flush()
    for i in range(0, 5000, 2):
        db.delete(b"k%06d" % i)
    keys = [k for k, _ in db.iterator()]
    assert keys == [b"k%06d" % i for i in range(1, 5000, 2)]
    assert [k for k, _ in db.iterator(reverse=True)] == keys[::-1]


def test_an_iterator_reads_as_of_its_creation(db):
    fill(db, [b"a", b"b"])
    it = db.iterator()
    assert next(it) == (b"a", b"v-a")
    db.put(b"c", b"new")
    db.delete(b"b")
    assert list(it) == [(b"b", b"v-b")]
    assert list(it) == []  # an exhausted iterator stays exhausted


def test_snapshot_isolates_later_writes(db):
    db.put(b"a", b"1")
    db.put(b"b", b"2")
    with db.snapshot() as snap:
        db.put(b"a", b"changed")
        db.delete(b"b")
        db.put(b"c", b"new")
        assert db.get(b"a", snapshot=snap) == b"1"
        assert snap.get(b"b") == b"2"
        assert db.get(b"c", snapshot=snap) is None
        assert list(db.iterator(snapshot=snap)) == [(b"a", b"1"), (b"b", b"2")]
        assert list(db.iterator(snapshot=snap, reverse=True)) == [(b"b", b"2"), (b"a", b"1")]
        assert db.get(b"a") == b"changed"
        assert isinstance(snap.seq, int)
    assert snap.released
    with pytest.raises(shale.Closed, match="released"):
        db.get(b"a", snapshot=snap)
    with pytest.raises(shale.Closed):
        snap.get(b"a")
    snap.release()  # a second release does nothing


def test_snapshot_survives_flushes(db):
    for i in range(3000):
        db.put(b"k%05d" % i, b"old")
    snap = db.snapshot()
    for i in range(3000):
        db.put(b"k%05d" % i, b"new")
    db.flush()
    assert db.get(b"k00010", snapshot=snap) == b"old"
    assert all(v == b"old" for _, v in db.iterator(snapshot=snap))
    snap.release()


def test_a_snapshot_of_another_store_is_refused(db, tmp_path):
    with shale.Db(tmp_path / "other", **SMALL) as other:
        snap = other.snapshot()
        with pytest.raises(shale.InvalidArgument, match="another store"):
            db.get(b"k", snapshot=snap)
        with pytest.raises(shale.InvalidArgument):
            db.iterator(snapshot=snap)
        snap.release()


def test_snapshots_and_iterators_keep_a_closed_store_readable(path):
    db = shale.Db(path, **SMALL)
    db.put(b"a", b"1")
    db.put(b"b", b"2")
    snap = db.snapshot()
    it = db.iterator()
    db.close()
    assert snap.get(b"a") == b"1"
    assert list(it) == [(b"a", b"1"), (b"b", b"2")]
    with pytest.raises(shale.Closed):
        db.get(b"a")
    snap.release()
    del it
    import gc

    gc.collect()
    # The last holder closed it: the store opens again.
    with shale.Db(path, **SMALL) as again:
        assert again.get(b"b") == b"2"


def test_threads_share_one_db(db):
    threads_n, per_thread = 4, 2000
    errors = []

    def writer(t):
        try:
            for i in range(per_thread):
                key = b"t%d-%05d" % (t, i)
                db.put(key, key[::-1])
                assert db.get(key) == key[::-1]
        except Exception as e:  # reported by the main thread
            errors.append(e)

    def scanner():
        try:
            for _ in range(20):
                keys = [k for k, _ in db.iterator()]
                assert keys == sorted(keys)
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(threads_n)]
    threads.append(threading.Thread(target=scanner))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(1 for _ in db.iterator()) == threads_n * per_thread


def test_the_gil_is_released_while_the_engine_works(db):
    # A thread counting in Python advances only while it holds the GIL. A C call that kept
    # the GIL would let it count nothing from just before the call to just after (a call
    # runs no bytecode, so the interpreter never hands the GIL over in it); counted across
    # synced writes and a flush, each waiting for the device, it counts.
    stop = threading.Event()
    ticks = [0]

    def counter():
        while not stop.is_set():
            ticks[0] += 1

    t = threading.Thread(target=counter)
    t.start()
    during = 0
    try:
        for i in range(3000):
            db.put(b"k%05d" % i, b"v" * 100)
        for i in range(50):
            before = ticks[0]
            db.put(b"sync%d" % i, b"v", sync=True)
            during += ticks[0] - before
        before = ticks[0]
        db.flush()
        during += ticks[0] - before
    finally:
        stop.set()
        t.join()
    assert during > 0


def test_an_iterator_shared_by_threads_returns_each_entry_once(db):
    keys = [b"k%05d" % i for i in range(3000)]
    fill(db, keys)
    it = db.iterator()
    seen = [[] for _ in range(4)]

    def drain(n):
        for k, _ in it:
            seen[n].append(k)

    threads = [threading.Thread(target=drain, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(k for part in seen for k in part) == keys


def test_reprs(db):
    assert "shale.Db" in repr(db)
    assert "0 operations" in repr(db.write_batch())
    with db.snapshot() as snap:
        assert "seq=" in repr(snap)
    assert "released" in repr(snap)
    assert isinstance(shale.__version__, str)


def test_the_type_stubs_name_what_the_module_has():
    import ast
    import pathlib

    import shale._shale as native

    stub = pathlib.Path(__file__).parent.parent / "python" / "shale" / "_shale.pyi"
    tree = ast.parse(stub.read_text())
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    assert {c.name for c in classes} >= {"Db", "WriteBatch", "Snapshot", "Iterator", "Error"}
    for cls in classes:
        assert hasattr(native, cls.name), cls.name
        for node in cls.body:
            if isinstance(node, ast.FunctionDef) and node.name != "__init__":
                assert hasattr(getattr(native, cls.name), node.name), f"{cls.name}.{node.name}"
    public = {name for name in dir(native) if not name.startswith("_")}
    assert public == {c.name for c in classes}
    assert set(shale.__all__) == public | {"__version__", "open"}
