"""A model test: random operations on shale.Db against a dict, with reopens and snapshots.

Hypothesis drives puts, deletes, batches, point reads, iterations (prefix, bounds, reverse),
snapshots and close/reopen; after each step the store must answer as the dict does. A failure
prints the shortest sequence of steps that shows it. SHALE_PY_MODEL_EXAMPLES runs more.
"""

import os
import shutil
import tempfile

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

# Few distinct bytes so that keys collide, share prefixes and sort around 0x00 and 0xff.
keys = st.lists(st.sampled_from([b"\x00", b"a", b"b", b"\xff"]), max_size=4).map(b"".join)
values = st.binary(max_size=40)
bounds = st.none() | keys


def expected_range(model, prefix=None, lower=None, upper=None, reverse=False):
    out = sorted(
        (k, v)
        for k, v in model.items()
        if (prefix is None or k.startswith(prefix))
        and (lower is None or k >= lower)
        and (upper is None or k < upper)
    )
    return out[::-1] if reverse else out


class DbAgainstDict(RuleBasedStateMachine):
    snapshots = Bundle("snapshots")

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="shale-model-")
        self.path = os.path.join(self.dir, "store")
        self.db = shale.Db(self.path, **SMALL)
        self.model = {}
        self.live_snapshots = []

    def teardown(self):
        for snap, _ in self.live_snapshots:
            snap.release()
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(key=keys, value=values)
    def put(self, key, value):
        self.db.put(key, value)
        self.model[key] = value

    @rule(key=keys)
    def delete(self, key):
        self.db.delete(key)
        self.model.pop(key, None)

    @rule(ops=st.lists(st.tuples(keys, st.none() | values), max_size=8), with_block=st.booleans())
    def write_batch(self, ops, with_block):
        if with_block:
            with self.db.write_batch() as batch:
                for key, value in ops:
                    batch.put(key, value) if value is not None else batch.delete(key)
        else:
            batch = shale.WriteBatch()
            for key, value in ops:
                batch.put(key, value) if value is not None else batch.delete(key)
            self.db.write(batch)
        for key, value in ops:
            if value is None:
                self.model.pop(key, None)
            else:
                self.model[key] = value

    @rule(key=keys)
    def get(self, key):
        assert self.db.get(key) == self.model.get(key)

    @rule(prefix=keys, reverse=st.booleans())
    def iterate_prefix(self, prefix, reverse):
        got = list(self.db.iterator(prefix=prefix, reverse=reverse))
        assert got == expected_range(self.model, prefix=prefix, reverse=reverse)

    @rule(lower=bounds, upper=bounds, reverse=st.booleans())
    def iterate_bounds(self, lower, upper, reverse):
        got = list(self.db.iterator(lower=lower, upper=upper, reverse=reverse))
        assert got == expected_range(self.model, lower=lower, upper=upper, reverse=reverse)

    @precondition(lambda self: len(self.live_snapshots) < 4)
    @rule(target=snapshots)
    def take_snapshot(self):
        entry = (self.db.snapshot(), dict(self.model))
        self.live_snapshots.append(entry)
        return entry

    @rule(entry=snapshots, key=keys, reverse=st.booleans())
    def read_snapshot(self, entry, key, reverse):
        snap, frozen = entry
        if snap.released:
            return
        assert self.db.get(key, snapshot=snap) == frozen.get(key)
        got = list(self.db.iterator(snapshot=snap, reverse=reverse))
        assert got == expected_range(frozen, reverse=reverse)

    @rule(entry=consumes(snapshots))
    def release_snapshot(self, entry):
        entry[0].release()
        if entry in self.live_snapshots:  # not released by a reopen already
            self.live_snapshots.remove(entry)

    @rule()
    def flush(self):
        self.db.flush()

    @rule()
    def reopen(self):
        # Snapshots do not outlive the handle they came from in this test: release them so the
        # store really closes and the next open recovers it from its volume.
        for snap, _ in self.live_snapshots:
            snap.release()
        self.live_snapshots.clear()
        self.db.close()
        self.db = shale.Db(self.path, create_if_missing=False, **SMALL)

    @invariant()
    def whole_store_matches(self):
        assert list(self.db.iterator()) == expected_range(self.model)


DbAgainstDict.TestCase.settings = settings(
    max_examples=int(os.environ.get("SHALE_PY_MODEL_EXAMPLES", "40")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_db_against_dict = DbAgainstDict.TestCase
