"""Type stubs of the native module shale._shale (crates/python/src)."""

import os
from types import TracebackType
from typing import Iterator as _Iterator
from typing import Optional, Tuple, Type, Union

_Bytes = Union[bytes, bytearray, memoryview]

__version__: str

class Error(Exception):
    """Base class of every error of a shale store."""

class InvalidArgument(Error):
    """Bad options or input (an oversized key or value, a snapshot of another store)."""

class Corruption(Error):
    """Persisted bytes are damaged: a checksum or structure check failed."""

class IoError(Error):
    """The device failed a request."""

class NoSpace(Error):
    """No room on the volume or the device."""

class Busy(Error):
    """The request queue is full: resubmit later."""

class InUse(Error):
    """The store is open already, in this process or another."""

class Stopped(Error):
    """An earlier failed write stopped the store: reopen it."""

class ReadOnly(Error):
    """A write on a store that only reads."""

class Closed(Error):
    """A call on a closed Db, or through a released Snapshot."""

class NotAStore(Error):
    """The path holds no lsm store: another engine's store, a newer format, or foreign data. Nothing was written to it."""

class Db:
    """An open lsm store. Keys and values are bytes; writes are atomic and ordered."""

    def __init__(
        self,
        path: Union[str, os.PathLike[str]],
        *,
        create_if_missing: bool = True,
        write_buffer_size: Optional[int] = None,
        block_cache_size: Optional[int] = None,
        sync: bool = False,
    ) -> None: ...
    @staticmethod
    def open(
        path: Union[str, os.PathLike[str]],
        *,
        create_if_missing: bool = True,
        write_buffer_size: Optional[int] = None,
        block_cache_size: Optional[int] = None,
        sync: bool = False,
    ) -> "Db": ...
    def put(self, key: _Bytes, value: _Bytes, sync: Optional[bool] = None) -> None: ...
    def get(self, key: _Bytes, snapshot: Optional["Snapshot"] = None) -> Optional[bytes]: ...
    def delete(self, key: _Bytes, sync: Optional[bool] = None) -> None: ...
    def write_batch(self, sync: Optional[bool] = None) -> "WriteBatch": ...
    def write(self, batch: "WriteBatch", sync: Optional[bool] = None) -> None: ...
    def iterator(
        self,
        prefix: Optional[_Bytes] = None,
        lower: Optional[_Bytes] = None,
        upper: Optional[_Bytes] = None,
        reverse: bool = False,
        snapshot: Optional["Snapshot"] = None,
    ) -> "Iterator": ...
    def snapshot(self) -> "Snapshot": ...
    def checkpoint(self, path: Union[str, os.PathLike[str]]) -> int: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def path(self) -> str: ...
    def __enter__(self) -> "Db": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

class WriteBatch:
    """Puts and deletes applied atomically, in order, by Db.write(batch)."""

    def __init__(self) -> None: ...
    def put(self, key: _Bytes, value: _Bytes) -> None: ...
    def delete(self, key: _Bytes) -> None: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...
    def __enter__(self) -> "WriteBatch": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

class Snapshot:
    """A consistent view of the store as of Db.snapshot()."""

    def get(self, key: _Bytes) -> Optional[bytes]: ...
    @property
    def seq(self) -> int: ...
    @property
    def released(self) -> bool: ...
    def release(self) -> None: ...
    def __enter__(self) -> "Snapshot": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

class Iterator(_Iterator[Tuple[bytes, bytes]]):
    """(key, value) pairs of a store in key order, from Db.iterator(...)."""

    def __iter__(self) -> "Iterator": ...
    def __next__(self) -> Tuple[bytes, bytes]: ...
