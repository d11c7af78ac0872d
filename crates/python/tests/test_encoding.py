"""encoding="utf-8": str keys and values in and out of every call, bytes kept as the default."""

import pytest

import shale
from conftest import SMALL


@pytest.fixture
def text_db(path):
    store = shale.Db(path, encoding="utf-8", **SMALL)
    yield store
    store.close()


WORDS = ["", "a", "é", "z", "Ω", "ö", "日本", "😀", "a\x00b", "\U0010ffff"]


def test_bytes_is_the_default(db):
    assert db.encoding is None
    db[b"k"] = b"v"
    assert type(db[b"k"]) is bytes
    assert "encoding" not in repr(db)


def test_str_round_trips_through_every_read(text_db):
    for w in WORDS:
        text_db[w] = w * 2
    for w in WORDS:
        assert text_db[w] == w * 2 and type(text_db[w]) is str
        assert text_db.get(w) == w * 2
        assert w in text_db
    assert text_db.encoding == "utf-8"
    assert "encoding=utf-8" in repr(text_db)
    assert text_db.multi_get(WORDS) == [w * 2 for w in WORDS]
    assert text_db[["a", "missing"]] == ["aa", None]
    assert list(text_db.items()) == [(w, w * 2) for w in sorted(WORDS)]
    assert all(type(k) is str and type(v) is str for k, v in text_db.iterator())


def test_str_keys_come_back_in_python_s_sort_order(text_db):
    # UTF-8's bytewise order is code point order, which is how Python sorts str: the reason
    # UTF-8 is the one encoding offered.
    for w in WORDS:
        text_db[w] = ""
    assert list(text_db) == sorted(WORDS)
    assert list(text_db.keys(backwards=True)) == sorted(WORDS, reverse=True)


def test_str_ranges_prefixes_and_bounds(text_db):
    for w in ["apple", "apricot", "banana", "cherry", "äpfel"]:
        text_db[w] = w.upper()
    assert list(text_db.keys(from_key="apr", to_key="c")) == ["apricot", "banana"]
    assert list(text_db.keys(True, "banana", "apple")) == ["banana", "apricot"]
    assert list(text_db.values(prefix="ap")) == ["APPLE", "APRICOT"]
    assert list(text_db.iterator(lower="b", upper="d")) == [
        ("banana", "BANANA"), ("cherry", "CHERRY")
    ]
    assert list(text_db.keys(from_key="z")) == ["äpfel"]  # ä (U+00E4) sorts after z


def test_str_deletes_batches_and_range_deletes(text_db):
    for w in ["a", "b", "c", "d"]:
        text_db[w] = w
    del text_db["a"]
    text_db.delete("b")
    with text_db.write_batch() as batch:
        batch["x"] = "new"
        batch.put("y", "newer")
        batch.delete_range("c", "d")
    assert list(text_db.items()) == [("d", "d"), ("x", "new"), ("y", "newer")]
    text_db.delete_range("a", "y")
    assert list(text_db) == ["y"]


def test_a_standalone_batch_takes_an_encoding(text_db):
    batch = shale.WriteBatch(encoding="utf-8")
    batch["k"] = "v"
    text_db.write(batch)
    assert text_db["k"] == "v"
    with pytest.raises(TypeError, match="key must be bytes"):
        shale.WriteBatch().put("k", "v")
    with pytest.raises(TypeError, match="must be str"):
        batch.put(b"k", b"v")


def test_str_snapshots(text_db):
    text_db["k"] = "old"
    with text_db.snapshot() as snap:
        text_db["k"] = "new"
        assert snap["k"] == "old" and snap.get("k") == "old"
        assert text_db.get("k", snapshot=snap) == "old"
        assert list(snap.items()) == [("k", "old")]
        assert "k" in snap and "x" not in snap


def test_bytes_on_a_str_db_raise_type_error_saying_why(text_db):
    for call in [
        lambda: text_db.__setitem__(b"k", "v"),
        lambda: text_db.__setitem__("k", b"v"),
        lambda: text_db[b"k"],
        lambda: b"k" in text_db,
        lambda: text_db.get(b"k"),
        lambda: text_db.put("k", bytearray(b"v")),
        lambda: text_db.keys(from_key=b"a"),
        lambda: text_db.iterator(prefix=b"a"),
        lambda: text_db.multi_get([b"a"]),
        lambda: text_db.delete_range(b"a", "b"),
        lambda: text_db.write_batch().put(b"k", "v"),
        lambda: text_db.__setitem__(1, "v"),
    ]:
        with pytest.raises(TypeError, match=r'must be str \(the Db was opened with encoding="utf-8"\)'):
            call()


def test_a_lone_surrogate_cannot_be_encoded(text_db):
    with pytest.raises(UnicodeEncodeError):
        text_db["\ud800"] = "v"
    with pytest.raises(UnicodeEncodeError):
        text_db["k"] = "\udfff"


def test_bytes_that_are_not_utf8_raise_unicode_decode_error(path):
    with shale.Db(path, **SMALL) as db:
        db[b"good"] = b"\xc3\xa9"
        db[b"bad"] = b"\xff\xfe"
        db[b"\xff"] = b"x"
    with shale.Db(path, encoding="utf-8", **SMALL) as db:
        assert db["good"] == "é"
        with pytest.raises(UnicodeDecodeError):
            db["bad"]
        assert "bad" in db  # a membership test decodes nothing
        with pytest.raises(UnicodeDecodeError):
            list(db.items())
        assert list(db.keys(to_key="good")) == ["bad"]  # keys alone decode no value
        with pytest.raises(UnicodeDecodeError):
            list(db.keys(from_key="good"))  # the key b"\xff"


def test_utf8_spellings_are_accepted_and_other_encodings_refused(tmp_path):
    for i, name in enumerate(["utf-8", "UTF-8", "utf8", "utf_8", "U8"]):
        with shale.open(tmp_path / f"s{i}", encoding=name, **SMALL) as db:
            assert db.encoding == "utf-8"
    with pytest.raises(shale.InvalidArgument, match="not supported"):
        shale.Db(tmp_path / "latin", encoding="latin-1")
    with pytest.raises(shale.InvalidArgument, match="not supported"):
        shale.WriteBatch(encoding="utf-16")
    with pytest.raises(shale.InvalidArgument, match="unknown encoding"):
        shale.Db(tmp_path / "nope", encoding="no-such-codec")
    with pytest.raises(TypeError):
        shale.Db(tmp_path / "int", encoding=8)


def test_a_store_written_as_str_reads_as_bytes(path):
    with shale.open(path, encoding="utf-8", **SMALL) as db:
        db["clé"] = "valeur"
    with shale.open(path, **SMALL) as db:
        assert db["clé".encode()] == "valeur".encode()


def test_shale_open_is_db(path):
    db = shale.open(path, sync=True, **SMALL)
    assert isinstance(db, shale.Db)
    db["x".encode()] = b"1"
    db.close()
    with shale.Db.open(path, create_if_missing=False, encoding="utf-8", **SMALL) as db:
        assert db["x"] == "1"
