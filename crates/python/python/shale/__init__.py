"""shale: an embeddable key-value store for NVMe SSDs (its lsm engine).

    import shale

    with shale.open("/tmp/store") as db:
        db[b"fruit/apple"] = b"red"
        assert db[b"fruit/apple"] == b"red"
        with db.write_batch() as batch:
            batch[b"fruit/pear"] = b"green"
            del batch[b"fruit/apple"]
        for key, value in db.items(prefix=b"fruit/"):
            print(key, value)

    with shale.open("/tmp/names", encoding="utf-8") as db:   # str keys and values
        db["ada"] = "lovelace"

See docs/python.md in shale's repository.
"""

import os
from typing import Optional, Union

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



def open(
    path: Union[str, "os.PathLike[str]"],
    *,
    create_if_missing: bool = True,
    write_buffer_size: Optional[int] = None,
    block_cache_size: Optional[int] = None,
    sync: bool = False,
    encoding: Optional[str] = None,
) -> Db:
    """Opens the store at path: the same as Db(path, ...), named as dbm.open and shelve.open.

    encoding="utf-8" makes keys and values str in and out; None (the default) keeps bytes.
    """
    return Db(
        path,
        create_if_missing=create_if_missing,
        write_buffer_size=write_buffer_size,
        block_cache_size=block_cache_size,
        sync=sync,
        encoding=encoding,
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
    "open",
]
