"""Type stubs of the native module shale._shale (crates/python/src)."""

import os
from types import TracebackType
from typing import Any, Iterable, List
from typing import Iterator as _Iterator
from typing import Optional, Tuple, Type, Union

# A key or value argument: bytes-like by default, str on a Db opened with encoding="utf-8".
_In = Union[bytes, bytearray, memoryview, str]
# A key or value returned: bytes by default, str with encoding="utf-8".
_Out = Union[bytes, str]

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
    """An open lsm store. Keys and values are bytes, or str with encoding="utf-8"."""

    def __init__(
        self,
        path: Union[str, os.PathLike[str]],
        *,
        create_if_missing: bool = True,
        write_buffer_size: Optional[int] = None,
        block_cache_size: Optional[int] = None,
        sync: bool = False,
        encoding: Optional[str] = None,
    ) -> None: ...
    @staticmethod
    def open(
        path: Union[str, os.PathLike[str]],
        *,
        create_if_missing: bool = True,
        write_buffer_size: Optional[int] = None,
        block_cache_size: Optional[int] = None,
        sync: bool = False,
        encoding: Optional[str] = None,
    ) -> "Db": ...
    def put(self, key: _In, value: _In, sync: Optional[bool] = None) -> None: ...
    def get(
        self,
        key: Union[_In, List[_In]],
        default: Any = None,
        snapshot: Optional["Snapshot"] = None,
    ) -> Any: ...
    def multi_get(
        self, keys: Iterable[_In], snapshot: Optional["Snapshot"] = None
    ) -> List[Optional[_Out]]: ...
    def delete(self, key: _In, sync: Optional[bool] = None) -> None: ...
    def delete_range(self, begin: _In, end: _In, sync: Optional[bool] = None) -> None: ...
    def __getitem__(self, key: Union[_In, List[_In]]) -> Any: ...
    def __setitem__(self, key: _In, value: _In) -> None: ...
    def __delitem__(self, key: _In) -> None: ...
    def __contains__(self, key: _In) -> bool: ...
    def __iter__(self) -> "Iterator": ...
    def keys(
        self,
        backwards: bool = False,
        from_key: Optional[_In] = None,
        to_key: Optional[_In] = None,
        *,
        prefix: Optional[_In] = None,
        snapshot: Optional["Snapshot"] = None,
    ) -> "Iterator": ...
    def values(
        self,
        backwards: bool = False,
        from_key: Optional[_In] = None,
        to_key: Optional[_In] = None,
        *,
        prefix: Optional[_In] = None,
        snapshot: Optional["Snapshot"] = None,
    ) -> "Iterator": ...
    def items(
        self,
        backwards: bool = False,
        from_key: Optional[_In] = None,
        to_key: Optional[_In] = None,
        *,
        prefix: Optional[_In] = None,
        snapshot: Optional["Snapshot"] = None,
    ) -> "Iterator": ...
    def write_batch(self, sync: Optional[bool] = None) -> "WriteBatch": ...
    def write(self, batch: "WriteBatch", sync: Optional[bool] = None) -> None: ...
    def iterator(
        self,
        prefix: Optional[_In] = None,
        lower: Optional[_In] = None,
        upper: Optional[_In] = None,
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
    @property
    def encoding(self) -> Optional[str]: ...
    def __enter__(self) -> "Db": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

class WriteBatch:
    """Puts, deletes and range deletes applied atomically, in order, by Db.write(batch)."""

    def __init__(self, *, encoding: Optional[str] = None) -> None: ...
    def put(self, key: _In, value: _In) -> None: ...
    def delete(self, key: _In) -> None: ...
    def delete_range(self, begin: _In, end: _In) -> None: ...
    def __setitem__(self, key: _In, value: _In) -> None: ...
    def __delitem__(self, key: _In) -> None: ...
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
    """A consistent view of the store as of Db.snapshot(), read as a read-only mapping."""

    def get(self, key: Union[_In, List[_In]], default: Any = None) -> Any: ...
    def multi_get(self, keys: Iterable[_In]) -> List[Optional[_Out]]: ...
    def __getitem__(self, key: Union[_In, List[_In]]) -> Any: ...
    def __contains__(self, key: _In) -> bool: ...
    def __iter__(self) -> "Iterator": ...
    def keys(
        self,
        backwards: bool = False,
        from_key: Optional[_In] = None,
        to_key: Optional[_In] = None,
        *,
        prefix: Optional[_In] = None,
    ) -> "Iterator": ...
    def values(
        self,
        backwards: bool = False,
        from_key: Optional[_In] = None,
        to_key: Optional[_In] = None,
        *,
        prefix: Optional[_In] = None,
    ) -> "Iterator": ...
    def items(
        self,
        backwards: bool = False,
        from_key: Optional[_In] = None,
        to_key: Optional[_In] = None,
        *,
        prefix: Optional[_In] = None,
    ) -> "Iterator": ...
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

class Iterator(_Iterator[Any]):
    """A store's entries in key order: (key, value) pairs from Db.iterator(...) and items(),
    keys from keys() and iter(db), values from values()."""

    def __iter__(self) -> "Iterator": ...
    def __next__(self) -> Union[_Out, Tuple[_Out, _Out]]: ...
