"""shale.Db as a Python mapping, as RocksDict's Rdict is one: db[k], db[k] = v, del db[k],
k in db, get(k, default), iter(db), keys()/values()/items() with ranges and backwards,
multi_get, delete_range, and the same reads through a Snapshot and writes through a
WriteBatch."""

import pytest

import shale
from conftest import SMALL

KEYS = [b"a", b"b", b"c", b"d", b"e"]


@pytest.fixture
def filled(db):
    for k in KEYS:
        db[k] = k.upper()
    return db


def test_setitem_getitem_delitem(db):
    db[b"k"] = b"v"
    assert db[b"k"] == b"v"
    assert db.get(b"k") == b"v"  # the same store as put/get
    db[b"k"] = b"w"
    assert db[b"k"] == b"w"
    del db[b"k"]
    assert db.get(b"k") is None


def test_getitem_of_a_missing_key_raises_key_error_naming_the_key(db):
    with pytest.raises(KeyError) as err:
        db[b"missing"]
    assert err.value.args == (b"missing",)
    db[b"gone"] = b"1"
    del db[b"gone"]
    with pytest.raises(KeyError):
        db[b"gone"]


def test_delitem_of_a_missing_key_raises_nothing_as_in_rocksdict(db):
    del db[b"never-written"]
    db[b"k"] = b"v"
    del db[b"k"]
    del db[b"k"]
    assert b"k" not in db


def test_contains(filled):
    assert b"a" in filled
    assert b"z" not in filled
    assert b"" not in filled
    filled[b""] = b""
    assert b"" in filled  # an empty value is a value


def test_get_with_a_default(filled):
    assert filled.get(b"a") == b"A"
    assert filled.get(b"z") is None
    assert filled.get(b"z", b"fallback") == b"fallback"
    assert filled.get(b"z", default=0) == 0
    assert filled.get(b"a", b"fallback") == b"A"


def test_get_refuses_a_snapshot_in_the_default_s_place(filled):
    # Before get took a default, its second argument was the snapshot: a caller passing one
    # there gets a TypeError, never the snapshot object back for a missing key.
    with filled.snapshot() as snap:
        with pytest.raises(TypeError, match="snapshot=snap"):
            filled.get(b"z", snap)
        assert filled.get(b"a", snapshot=snap) == b"A"
        assert filled.get(b"z", b"-", snap) == b"-"


def test_iter_and_list_give_the_keys_in_order(db):
    for k in reversed(KEYS):
        db[k] = b"v"
    assert list(db) == KEYS
    assert [k for k in db] == KEYS
    assert sorted(db) == KEYS


def test_keys_values_items(filled):
    assert list(filled.keys()) == KEYS
    assert list(filled.values()) == [k.upper() for k in KEYS]
    assert list(filled.items()) == [(k, k.upper()) for k in KEYS]
    assert dict(filled.items()) == {k: k.upper() for k in KEYS}


def test_keys_values_items_backwards(filled):
    assert list(filled.keys(backwards=True)) == KEYS[::-1]
    assert list(filled.values(backwards=True)) == [k.upper() for k in KEYS[::-1]]
    assert list(filled.items(True)) == [(k, k.upper()) for k in KEYS[::-1]]


def test_from_key_is_included_and_to_key_excluded(filled):
    assert list(filled.keys(from_key=b"b")) == [b"b", b"c", b"d", b"e"]
    assert list(filled.keys(from_key=b"bb")) == [b"c", b"d", b"e"]
    assert list(filled.keys(to_key=b"c")) == [b"a", b"b"]
    assert list(filled.keys(from_key=b"b", to_key=b"d")) == [b"b", b"c"]
    assert list(filled.items(from_key=b"b", to_key=b"d")) == [(b"b", b"B"), (b"c", b"C")]
    assert list(filled.values(from_key=b"b", to_key=b"d")) == [b"B", b"C"]


def test_backwards_ranges_go_from_from_key_down_to_to_key(filled):
    # As RocksDict's backwards=True: the walk starts at from_key (included) and goes down;
    # to_key, where it stops, is excluded, as a Python slice's stop is.
    assert list(filled.keys(backwards=True, from_key=b"c")) == [b"c", b"b", b"a"]
    assert list(filled.keys(backwards=True, from_key=b"cc")) == [b"c", b"b", b"a"]
    assert list(filled.keys(backwards=True, to_key=b"b")) == [b"e", b"d", b"c"]
    assert list(filled.keys(True, b"d", b"a")) == [b"d", b"c", b"b"]
    assert list(filled.items(True, b"d", b"b")) == [(b"d", b"D"), (b"c", b"C")]


def test_backwards_from_key_includes_keys_it_is_a_prefix_of_only_when_equal(db):
    for k in [b"a", b"ab", b"ab\x00", b"ab\x01", b"ac"]:
        db[k] = b"v"
    assert list(db.keys(backwards=True, from_key=b"ab")) == [b"ab", b"a"]
    assert list(db.keys(backwards=True, from_key=b"ab\x00")) == [b"ab\x00", b"ab", b"a"]
    assert list(db.keys(backwards=True, to_key=b"ab")) == [b"ac", b"ab\x01", b"ab\x00"]


def test_empty_and_inverted_ranges_are_empty(filled):
    assert list(filled.keys(from_key=b"c", to_key=b"c")) == []
    assert list(filled.keys(from_key=b"d", to_key=b"b")) == []
    assert list(filled.keys(backwards=True, from_key=b"b", to_key=b"d")) == []
    assert list(filled.keys(from_key=b"x")) == []
    assert list(filled.keys(backwards=True, from_key=b"")) == []


def test_prefix(db):
    for k in [b"fruit", b"fruit/apple", b"fruit/pear", b"fruits", b"veg/leek"]:
        db[k] = b"v"
    assert list(db.keys(prefix=b"fruit/")) == [b"fruit/apple", b"fruit/pear"]
    assert list(db.keys(prefix=b"fruit/", backwards=True)) == [b"fruit/pear", b"fruit/apple"]
    assert list(db.items(prefix=b"veg/")) == [(b"veg/leek", b"v")]
    with pytest.raises(shale.InvalidArgument, match="not both"):
        db.keys(prefix=b"f", from_key=b"a")


def test_backwards_must_be_a_bool(filled):
    # keys(b"b") would otherwise read b"b" as backwards=True: RocksDict's first argument is
    # backwards too.
    with pytest.raises(TypeError):
        filled.keys(b"b")


def test_keys_values_items_are_lazy_iterators_as_of_their_creation(filled):
    keys = filled.keys()
    assert iter(keys) is keys
    assert next(keys) == b"a"
    filled[b"aa"] = b"new"  # written after the iterator was made: not seen
    del filled[b"e"]
    assert list(keys) == [b"b", b"c", b"d", b"e"]
    assert list(keys) == []  # an exhausted iterator stays exhausted
    assert "keys" in repr(filled.keys()) and "items" in repr(filled.items())


def test_ranges_over_flushed_data_and_memtables(db):
    for i in range(4000):
        db[b"k%05d" % i] = b"x" * 40
    db.flush()
    for i in range(0, 4000, 2):
        del db[b"k%05d" % i]
    odd = [b"k%05d" % i for i in range(1, 4000, 2)]
    assert list(db) == odd
    assert list(db.keys(backwards=True)) == odd[::-1]
    assert list(db.keys(from_key=b"k01000", to_key=b"k01010")) == odd[500:505]
    assert list(db.keys(True, b"k01009", b"k01000")) == odd[504:499:-1]
    assert len(list(db.values())) == 2000


def test_multi_get(filled):
    assert filled.multi_get([b"a", b"z", b"c"]) == [b"A", None, b"C"]
    assert filled.multi_get([]) == []
    assert filled.multi_get((k for k in [b"e", b"e"])) == [b"E", b"E"]  # any iterable
    assert filled.multi_get([bytearray(b"b"), memoryview(b"d")]) == [b"B", b"D"]


def test_a_list_key_reads_many_as_in_rocksdict(filled):
    assert filled[[b"a", b"z", b"e"]] == [b"A", None, b"E"]
    assert filled.get([b"a", b"z"]) == [b"A", None]
    assert filled.get([b"a", b"z"], b"-") == [b"A", b"-"]


def test_multi_get_refuses_one_key_and_wrong_types(filled):
    for one in [b"abc", bytearray(b"abc"), "abc"]:
        with pytest.raises(TypeError, match="not one"):
            filled.multi_get(one)
    with pytest.raises(TypeError):
        filled.multi_get(5)
    with pytest.raises(TypeError, match="key must be bytes"):
        filled.multi_get([b"a", "b"])


def test_multi_get_reads_at_a_snapshot(filled):
    with filled.snapshot() as snap:
        filled[b"a"] = b"changed"
        filled[b"z"] = b"new"
        assert filled.multi_get([b"a", b"z"], snapshot=snap) == [b"A", None]
        assert filled.get([b"a", b"z"], snapshot=snap) == [b"A", None]
    assert filled.multi_get([b"a", b"z"]) == [b"changed", b"new"]


def test_multi_get_across_flushed_data(db):
    keys = [b"k%05d" % i for i in range(3000)]
    for k in keys:
        db[k] = k[::-1]
    db.flush()
    asked = keys[::7] + [b"absent"]
    assert db.multi_get(asked) == [k[::-1] for k in keys[::7]] + [None]


def test_delete_range_deletes_begin_up_to_end(filled):
    filled.delete_range(b"b", b"d")
    assert list(filled) == [b"a", b"d", b"e"]
    filled.delete_range(b"", b"\xff")  # every key here
    assert list(filled) == []


def test_delete_range_over_flushed_data_and_later_writes(db):
    for i in range(3000):
        db[b"log/%05d" % i] = b"x"
    db[b"user/1"] = b"kept"
    db.flush()
    db.delete_range(b"log/", b"log/02000")
    assert next(iter(db)) == b"log/02000"
    db[b"log/00005"] = b"rewritten"  # a write after the range delete is untouched
    assert db[b"log/00005"] == b"rewritten"
    assert db[b"user/1"] == b"kept"
    assert sum(1 for _ in db.keys(prefix=b"log/")) == 1001


def test_delete_range_keeps_what_a_snapshot_sees(filled):
    with filled.snapshot() as snap:
        filled.delete_range(b"a", b"z")
        assert list(filled) == []
        assert list(snap) == KEYS


def test_an_empty_delete_range_is_refused_by_the_engine(filled):
    with pytest.raises(shale.InvalidArgument, match="start < end"):
        filled.delete_range(b"c", b"c")
    with pytest.raises(shale.InvalidArgument):
        filled.delete_range(b"d", b"b")
    assert list(filled) == KEYS


def test_delete_range_with_sync(path):
    with shale.Db(path, sync=True, **SMALL) as db:
        db[b"a"] = b"1"
        db.delete_range(b"a", b"b", sync=False)
        db[b"b"] = b"2"
        db.delete_range(b"b", b"c", sync=True)
        assert list(db) == []


def test_a_batch_as_a_mapping_and_its_delete_range(filled):
    with filled.write_batch() as batch:
        batch[b"x"] = b"1"
        del batch[b"a"]
        batch.delete_range(b"b", b"d")
        batch[b"c"] = b"after"  # a put after the range delete in one batch survives it
        assert len(batch) == 4
    assert list(filled.items()) == [(b"c", b"after"), (b"d", b"D"), (b"e", b"E"), (b"x", b"1")]


def test_a_batch_with_an_empty_range_applies_nothing(filled):
    batch = shale.WriteBatch()
    batch[b"new"] = b"1"
    batch.delete_range(b"c", b"a")
    with pytest.raises(shale.InvalidArgument):
        filled.write(batch)
    assert b"new" not in filled


def test_a_snapshot_reads_as_a_mapping(filled):
    snap = filled.snapshot()
    filled[b"a"] = b"changed"
    del filled[b"b"]
    filled[b"z"] = b"new"
    assert snap[b"a"] == b"A"
    assert snap[b"b"] == b"B"
    with pytest.raises(KeyError):
        snap[b"z"]
    assert b"b" in snap and b"z" not in snap
    assert snap.get(b"z") is None and snap.get(b"z", 1) == 1
    assert snap[[b"a", b"z"]] == [b"A", None]
    assert snap.get([b"a", b"z"], b"-") == [b"A", b"-"]
    assert snap.multi_get([b"b", b"z"]) == [b"B", None]
    assert list(snap) == KEYS
    assert list(snap.keys(True, b"c")) == [b"c", b"b", b"a"]
    assert list(snap.values(from_key=b"d")) == [b"D", b"E"]
    assert list(snap.items(prefix=b"e")) == [(b"e", b"E")]
    # The same reads through the Db at the snapshot.
    assert list(filled.items(snapshot=snap)) == list(snap.items())
    assert list(filled.keys(backwards=True, snapshot=snap)) == KEYS[::-1]
    snap.release()
    with pytest.raises(shale.Closed):
        snap[b"a"]
    with pytest.raises(shale.Closed):
        b"a" in snap
    with pytest.raises(shale.Closed):
        snap.keys()


def test_a_snapshot_of_another_store_is_refused_by_the_range_reads(db, tmp_path):
    with shale.Db(tmp_path / "other", **SMALL) as other:
        with other.snapshot() as snap:
            for call in [
                lambda: db.keys(snapshot=snap),
                lambda: db.items(snapshot=snap),
                lambda: db.multi_get([b"a"], snapshot=snap),
            ]:
                with pytest.raises(shale.InvalidArgument, match="another store"):
                    call()


def test_the_mapping_calls_on_a_closed_db_raise_closed(db):
    db.close()
    for call in [
        lambda: db[b"k"],
        lambda: db.__setitem__(b"k", b"v"),
        lambda: db.__delitem__(b"k"),
        lambda: b"k" in db,
        lambda: iter(db),
        lambda: db.keys(),
        lambda: db.values(),
        lambda: db.items(),
        lambda: db.multi_get([b"k"]),
        lambda: db.delete_range(b"a", b"b"),
    ]:
        with pytest.raises(shale.Closed):
            call()


@pytest.mark.parametrize("bad", ["text", 1, None, 1.5, (1, 2)])
def test_mapping_keys_and_values_that_are_not_bytes_raise_type_error(db, bad):
    with pytest.raises(TypeError, match="key must be bytes"):
        db[bad] = b"v"
    with pytest.raises(TypeError, match="value must be bytes"):
        db[b"k"] = bad
    with pytest.raises(TypeError):
        db[bad]
    with pytest.raises(TypeError):
        del db[bad]
    with pytest.raises(TypeError):
        bad in db
    if bad is not None:  # None is "no bound" for the ranges
        with pytest.raises(TypeError, match="from_key must be bytes"):
            db.keys(from_key=bad)
        with pytest.raises(TypeError, match="begin must be bytes"):
            db.delete_range(bad, b"z")


def test_a_str_key_on_a_bytes_db_says_how_to_use_str(db):
    with pytest.raises(TypeError, match='encoding="utf-8"'):
        db["text"] = b"v"


def test_len_is_not_offered(db):
    # The engine keeps no count of live keys: len() would be a full scan.
    with pytest.raises(TypeError):
        len(db)
