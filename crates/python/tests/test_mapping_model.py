"""A property test of the mapping API against a dict, with bytes and with str keys.

Hypothesis drives db[k] = v, del db[k], delete_range, batches with range deletes, db[k],
k in db, get(k, default), multi_get, keys()/values()/items() over ranges forward and
backwards, snapshots read as mappings, flushes and close/reopen; after each step the store
must answer as the dict does. The str machine's model compares str, so it checks too that
keys come back in Python's str order. A failure prints the shortest sequence of steps that
shows it. SHALE_PY_MODEL_EXAMPLES runs more.
"""

import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
)

import shale
from conftest import SMALL

# Few distinct pieces so that keys collide, share prefixes and sort around the edges: 0x00
# and 0xff bytes; for str, a NUL, a two-byte, a three-byte and the highest code point.
BYTE_PIECES = [b"\x00", b"a", b"b", b"\xff"]
STR_PIECES = ["\x00", "a", "é", "€", "\U0010ffff"]

MISSING = object()


def walk(model, backwards=False, from_key=None, to_key=None, prefix=None):
    """The (key, value) pairs that items(backwards, from_key, to_key, prefix=...) yields."""
    if backwards:
        keep = [
            k for k in model
            if (from_key is None or k <= from_key) and (to_key is None or k > to_key)
        ]
    else:
        keep = [
            k for k in model
            if (from_key is None or k >= from_key) and (to_key is None or k < to_key)
        ]
    if prefix is not None:
        keep = [k for k in keep if k.startswith(prefix)]
    return [(k, model[k]) for k in sorted(keep, reverse=backwards)]


class MappingAgainstDict(RuleBasedStateMachine):
    """Subclasses set the encoding and the pieces keys are made of."""

    encoding = None
    pieces = BYTE_PIECES
    snapshots = Bundle("snapshots")

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="shale-mapping-")
        self.path = os.path.join(self.dir, "store")
        self.db = shale.Db(self.path, encoding=self.encoding, **SMALL)
        self.model = {}
        self.live_snapshots = []

    def pick(self, data, keys, maybe_none=False):
        """A key drawn from `keys`, or one the model holds half of the time (random keys
        rarely meet the written ones), or None with `maybe_none`."""
        choices = [keys]
        if self.model:
            choices.append(st.sampled_from(sorted(self.model)))
        if maybe_none:
            choices.append(st.none())
        return data.draw(st.one_of(*choices))

    def teardown(self):
        for snap, _ in self.live_snapshots:
            snap.release()
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def key_strategy(pieces):
    empty = pieces[0][:0]
    return st.lists(st.sampled_from(pieces), max_size=3).map(lambda parts: empty.join(parts))


def value_strategy(pieces):
    if isinstance(pieces[0], bytes):
        return st.binary(max_size=20)
    return st.text(max_size=10)


def machine(name, encoding, pieces):
    """A state machine over keys made of `pieces`, the Db opened with `encoding`."""
    keys = key_strategy(pieces)
    values = value_strategy(pieces)

    class Machine(MappingAgainstDict):
        @rule(key=keys, value=values)
        def setitem(self, key, value):
            self.db[key] = value
            self.model[key] = value

        @rule(data=st.data())
        def delitem(self, data):
            key = self.pick(data, keys)
            del self.db[key]  # a missing key raises nothing
            self.model.pop(key, None)

        @rule(data=st.data())
        def delete_range(self, data):
            begin, end = self.pick(data, keys), self.pick(data, keys)
            if begin >= end:
                with pytest.raises(shale.InvalidArgument):
                    self.db.delete_range(begin, end)
                return
            self.db.delete_range(begin, end)
            for k in [k for k in self.model if begin <= k < end]:
                del self.model[k]

        @rule(
            ops=st.lists(
                st.one_of(
                    st.tuples(st.just("put"), keys, values),
                    st.tuples(st.just("del"), keys, st.none()),
                    st.tuples(st.just("range"), keys, keys),
                ),
                max_size=6,
            )
        )
        def batch(self, ops):
            ops = [op for op in ops if op[0] != "range" or op[1] < op[2]]  # no empty range
            with self.db.write_batch() as batch:
                for kind, a, b in ops:
                    if kind == "put":
                        batch[a] = b
                    elif kind == "del":
                        del batch[a]
                    else:
                        batch.delete_range(a, b)
            for kind, a, b in ops:
                if kind == "put":
                    self.model[a] = b
                elif kind == "del":
                    self.model.pop(a, None)
                else:
                    for k in [k for k in self.model if a <= k < b]:
                        del self.model[k]

        @rule(data=st.data())
        def getitem(self, data):
            key = self.pick(data, keys)
            if key in self.model:
                assert self.db[key] == self.model[key]
            else:
                with pytest.raises(KeyError):
                    self.db[key]

        @rule(data=st.data())
        def contains(self, data):
            key = self.pick(data, keys)
            assert (key in self.db) == (key in self.model)

        @rule(data=st.data(), default=st.sampled_from([None, MISSING, 0]))
        def get(self, data, default):
            key = self.pick(data, keys)
            assert self.db.get(key, default) == self.model.get(key, default)

        @rule(asked=st.lists(keys, max_size=6))
        def multi_get(self, asked):
            want = [self.model.get(k) for k in asked]
            assert self.db.multi_get(asked) == want
            assert self.db[list(asked)] == want

        @rule(data=st.data(), backwards=st.booleans())
        def ranges(self, data, backwards):
            from_key = self.pick(data, keys, maybe_none=True)
            to_key = self.pick(data, keys, maybe_none=True)
            want = walk(self.model, backwards, from_key, to_key)
            got = list(self.db.items(backwards, from_key, to_key))
            assert got == want
            assert list(self.db.keys(backwards, from_key, to_key)) == [k for k, _ in want]
            assert list(self.db.values(backwards, from_key, to_key)) == [v for _, v in want]

        @rule(backwards=st.booleans(), prefix=keys)
        def prefixes(self, backwards, prefix):
            got = list(self.db.items(backwards, prefix=prefix))
            assert got == walk(self.model, backwards, prefix=prefix)

        @precondition(lambda self: len(self.live_snapshots) < 3)
        @rule(target=MappingAgainstDict.snapshots)
        def take_snapshot(self):
            entry = (self.db.snapshot(), dict(self.model))
            self.live_snapshots.append(entry)
            return entry

        @rule(entry=MappingAgainstDict.snapshots, data=st.data(), backwards=st.booleans())
        def read_snapshot(self, entry, data, backwards):
            snap, frozen = entry
            key = self.pick(data, keys)
            bound = self.pick(data, keys, maybe_none=True)
            if snap.released:
                return
            assert (key in snap) == (key in frozen)
            assert snap.get(key) == frozen.get(key)
            assert list(snap.items(backwards, bound)) == walk(frozen, backwards, bound)
            assert list(self.db.keys(backwards, snapshot=snap)) == [
                k for k, _ in walk(frozen, backwards)
            ]

        @rule(entry=consumes(MappingAgainstDict.snapshots))
        def release_snapshot(self, entry):
            entry[0].release()
            if entry in self.live_snapshots:  # not released by a reopen already
                self.live_snapshots.remove(entry)

        @rule()
        def flush(self):
            self.db.flush()

        @rule()
        def reopen(self):
            for snap, _ in self.live_snapshots:
                snap.release()
            self.live_snapshots.clear()
            self.db.close()
            self.db = shale.open(
                self.path, create_if_missing=False, encoding=self.encoding, **SMALL
            )

        @invariant()
        def whole_store_matches(self):
            assert list(self.db) == sorted(self.model)

    Machine.encoding = encoding
    Machine.pieces = pieces
    Machine.__name__ = Machine.__qualname__ = name
    Machine.TestCase.settings = settings(
        max_examples=int(os.environ.get("SHALE_PY_MODEL_EXAMPLES", "30")),
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    return Machine


BytesMapping = machine("BytesMapping", None, BYTE_PIECES)
StrMapping = machine("StrMapping", "utf-8", STR_PIECES)
test_bytes_mapping_against_dict = BytesMapping.TestCase
test_str_mapping_against_dict = StrMapping.TestCase
