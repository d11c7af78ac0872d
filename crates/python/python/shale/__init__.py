"""shale: an embeddable key-value store for NVMe SSDs (its lsm engine).

    import shale

    with shale.Db("/tmp/store") as db:
        db.put(b"fruit/apple", b"red")
        assert db.get(b"fruit/apple") == b"red"
        with db.write_batch() as batch:
            batch.put(b"fruit/pear", b"green")
            batch.delete(b"fruit/apple")
        for key, value in db.iterator(prefix=b"fruit/"):
            print(key, value)

See docs/python.md in shale's repository.
"""

from ._shale import (
    Busy,
    Closed,
    Corruption,
    Db,
    Error,
    InUse,
    InvalidArgument,
    IoError,
    Iterator,
    NoSpace,
    NotAStore,
    ReadOnly,
    Snapshot,
    Stopped,
    WriteBatch,
    __version__,
)

__all__ = [
    "Busy",
    "Closed",
    "Corruption",
    "Db",
    "Error",
    "InUse",
    "InvalidArgument",
    "IoError",
    "Iterator",
    "NoSpace",
    "NotAStore",
    "ReadOnly",
    "Snapshot",
    "Stopped",
    "WriteBatch",
    "__version__",
]
