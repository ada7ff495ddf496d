"""Where the store's files live, a local directory or any fsspec URL: files written whole and
published atomically."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from otel_replay.errors import StoreError, StoreFullError, StoreNotWritableError

# The thread pools load with the first flush or remote store: reading a local store needs none.
if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

T = TypeVar("T")

__all__ = ["NO_SPACE", "Backend", "FileInfo", "FsspecBackend", "LocalBackend", "is_url", "submit"]

FileInfo = tuple[int, float]
"""``(size in bytes, modification time as Unix seconds)``."""

_TMP_PREFIX = ".tmp-"

SYNC_THREADS = 8
"""Threads that fsync the files (or directories) of one flush at once."""


def is_url(location: str) -> bool:
    """True for ``scheme://…`` locations (handled by fsspec), False for local paths."""
    scheme, sep, _ = location.partition("://")
    return bool(sep) and scheme.isidentifier() and scheme != "file"


def anchored(location: str) -> str:
    """``location`` as it means from the current directory, whatever it becomes later: a URL
    as it is, a local path (``file://`` dropped, ``~`` expanded) made absolute."""
    if is_url(location):
        return location
    return str(Path(os.path.expanduser(location.removeprefix("file://"))).absolute())


class Backend(Protocol):
    """The file operations the store needs, on paths relative to its root."""

    location: str
    local: bool

    def read(self, rel: str) -> bytes: ...
    def read_range(self, rel: str, start: int, end: int) -> bytes: ...
    def read_tail(self, rel: str, size: int) -> bytes: ...
    def size(self, rel: str) -> int: ...
    def stamp(self, rel: str) -> float: ...
    def exists(self, rel: str) -> bool: ...
    def publish(self, rel: str, data: bytes, *, replace: bool = True) -> bool: ...
    def publish_many(self, items: Sequence[tuple[str, bytes]]) -> None: ...
    def sync(self) -> None: ...
    def listdir(self, rel: str) -> list[str]: ...
    def find(self, rel: str) -> dict[str, FileInfo]: ...
    def delete(self, rel: str) -> None: ...
    def delete_tree(self, rel: str) -> None: ...
    def where_missing(self) -> str | None: ...


NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
"""The errnos of a full device (or a user's quota used up)."""


@contextlib.contextmanager
def _writing(path: object, store: str) -> Iterator[None]:
    """Turn a failed write into StoreFullError (no space left on the device), into
    StoreNotWritableError (permissions, read-only file system) or StoreError, naming the
    path (and, for a full device, the store at ``store``)."""
    try:
        yield
    except PermissionError as exc:
        raise StoreNotWritableError(f"cannot write {path}: {exc.strerror or exc}") from None
    except OSError as exc:
        if exc.errno in NO_SPACE:
            raise StoreFullError(
                f"no space left on the device holding the store at {store} (writing {path})"
            ) from None
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise StoreNotWritableError(f"cannot write {path}: {exc.strerror}") from None
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc


_pools: dict[str, tuple[int, ThreadPoolExecutor]] = {}
"""Thread pools by name, with the process they belong to (a forked child starts its own)."""
_pool_lock = threading.Lock()


def _sync_pool() -> ThreadPoolExecutor:
    """The process's fsync threads (started on first use; a forked child starts its own)."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415 - see the imports

    with _pool_lock:
        pool = _pools.get("fsync")
        if pool is None or pool[0] != os.getpid():
            pool = _pools["fsync"] = (
                os.getpid(),
                ThreadPoolExecutor(SYNC_THREADS, "otel-replay-fsync"),
            )
        return pool[1]


def submit(pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> Future[T]:
    """``pool.submit(fn, *args)``, or ``fn`` run in this thread when the pool takes no more
    work because the interpreter is exiting (a flush from an atexit handler, as a tracer
    provider's shutdown is)."""
    try:
        return pool.submit(fn, *args)
    except RuntimeError:
        from concurrent.futures import Future  # noqa: PLC0415 - see the imports

        done: Future[T] = Future()
        try:
            done.set_result(fn(*args))
        except BaseException as exc:
            done.set_exception(exc)
        return done


def _fsync_all(fds: Sequence[int]) -> None:
    """fsync every descriptor, from up to :data:`SYNC_THREADS` threads at once (fsync
    releases the GIL); the first error is raised once all are done."""
    if len(fds) < 3:
        for fd in fds:
            os.fsync(fd)
        return
    count = min(len(fds), SYNC_THREADS)
    shares = [fds[n::count] for n in range(count)]
    futures = [submit(_sync_pool(), _fsync_each, share) for share in shares]
    errors = [exc for exc in (future.result() for future in futures) if exc is not None]
    if errors:
        raise errors[0]


def _fsync_each(fds: Sequence[int]) -> OSError | None:
    error: OSError | None = None
    for fd in fds:
        try:
            os.fsync(fd)
        except OSError as exc:
            error = error or exc
    return error


class LocalBackend:
    """A store in a local directory."""

    local = True

    def __init__(self, root: Path) -> None:
        # Absolute: an application that changes its directory after opening the store (an
        # agent working in a checkout or a temporary directory) must keep writing here.
        self.root = Path(os.path.expanduser(root)).absolute()
        self.location = str(root)  # as given, for messages
        self._dirty: set[Path] = set()

    def path(self, rel: str) -> Path:
        """The absolute path of ``rel``."""
        return self.root / rel if rel else self.root

    def read(self, rel: str) -> bytes:
        """The whole file; FileNotFoundError when absent, OSError when it is no regular file."""
        with open(_open_file(self.path(rel)), "rb") as file:
            return file.read()

    def read_range(self, rel: str, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` (exclusive) of the file."""
        fd = _open_file(self.path(rel))
        try:
            return os.pread(fd, end - start, start)
        finally:
            os.close(fd)

    def read_tail(self, rel: str, size: int) -> bytes:
        """The last ``size`` bytes of the file (all of it when it is shorter)."""
        fd = _open_file(self.path(rel))
        try:
            total = os.fstat(fd).st_size
            return os.pread(fd, min(size, total), max(0, total - size))
        finally:
            os.close(fd)

    def size(self, rel: str) -> int:
        """Size of the file in bytes."""
        return self.path(rel).stat().st_size

    def stamp(self, rel: str) -> float:
        """The file's modification time (Unix seconds); FileNotFoundError when absent."""
        return self.path(rel).stat().st_mtime

    def exists(self, rel: str) -> bool:
        """Whether ``rel`` exists."""
        return self.path(rel).exists()

    def makedirs(self, rel: str) -> None:
        """Create ``rel`` and its parents (the store's own parents too, as ``mkdir -p``);
        new directories are fsynced at the next sync."""
        path = self.path(rel)
        missing: list[Path] = []
        while not path.exists() and path != path.parent:
            missing.append(path)
            path = path.parent
        for new in reversed(missing):
            with _writing(new, self.location), contextlib.suppress(FileExistsError):
                new.mkdir()
            self._dirty.add(new.parent)

    def publish(self, rel: str, data: bytes, *, replace: bool = True) -> bool:
        """Write ``data`` to ``rel`` atomically (fsynced before it becomes visible).

        With ``replace=False`` an existing file is kept and False is returned.
        """
        tmp, target = self._stage(rel, data)
        published = True
        with _writing(target, self.location):
            try:
                if replace:
                    os.replace(tmp, target)
                else:
                    try:
                        os.link(tmp, target)
                    except FileExistsError:
                        published = False
            finally:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
        if published:
            self._dirty.add(target.parent)
        return published

    def publish_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """:meth:`publish` (replacing) of several files, in less time: each is written and
        fsynced to a temporary file on one of a few threads at once (directories made, the
        writes and the fsyncs all release the GIL, and the file system folds concurrent
        fsyncs into fewer journal commits), then all are renamed into place. A failure leaves
        the files renamed so far published and removes the other temporary files."""
        if len(items) < 2:
            for rel, data in items:
                self.publish(rel, data)
            return
        jobs = [submit(_sync_pool(), self._stage, rel, data) for rel, data in items]
        staged: list[tuple[Path, Path]] = []
        failure: BaseException | None = None
        for job in jobs:  # every job is waited for: none is left writing
            try:
                staged.append(job.result())
            except BaseException as exc:
                failure = failure or exc
        try:
            if failure is not None:
                raise failure
            while staged:
                tmp, target = staged[0]
                with _writing(target, self.location):
                    os.replace(tmp, target)
                staged.pop(0)
                self._dirty.add(target.parent)
        finally:
            for tmp, _ in staged:  # not renamed: not published
                with contextlib.suppress(OSError):
                    tmp.unlink()

    def _stage(self, rel: str, data: bytes) -> tuple[Path, Path]:
        """Write ``data`` to a new temporary file beside ``rel``, fsynced: (its path, the
        target's)."""
        target = self.path(rel)
        self.makedirs(rel.rpartition("/")[0])
        tmp = target.with_name(f"{_TMP_PREFIX}{os.getpid()}-{os.urandom(4).hex()}")
        with _writing(target, self.location):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            except BaseException:
                os.close(fd)
                with contextlib.suppress(OSError):
                    tmp.unlink()
                raise
            os.close(fd)
        return tmp, target

    def sync(self) -> None:
        """fsync every directory changed since the last sync (new names become durable)."""
        dirty, self._dirty = self._dirty, set()
        fds: list[int] = []
        try:
            for directory in dirty:
                with _writing(directory, self.location):
                    try:
                        fds.append(os.open(directory, os.O_RDONLY))
                    except FileNotFoundError:
                        continue
            with _writing(self.root, self.location):
                _fsync_all(fds)
        finally:
            for fd in fds:
                os.close(fd)

    def listdir(self, rel: str) -> list[str]:
        """Names in directory ``rel`` (empty when it does not exist)."""
        try:
            return sorted(os.listdir(self.path(rel)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def find(self, rel: str) -> dict[str, FileInfo]:
        """Every regular file under ``rel``, recursively: relative path -> (size, mtime).
        Nothing else is the store's: a FIFO (or a link to ``/dev/zero``) planted under a
        record file's name would block or fill memory when read."""
        found: dict[str, FileInfo] = {}
        base = self.path(rel)
        for dirpath, _dirs, files in os.walk(base):
            for name in files:
                full = Path(dirpath) / name
                try:
                    stat = full.stat()
                except (FileNotFoundError, OSError):  # gone, or a link that leads nowhere
                    continue
                if S_ISREG(stat.st_mode):
                    found[full.relative_to(self.root).as_posix()] = (stat.st_size, stat.st_mtime)
        return found

    def delete(self, rel: str) -> None:
        """Remove a file (already gone is fine)."""
        path = self.path(rel)
        with _writing(path, self.location), contextlib.suppress(FileNotFoundError):
            path.unlink()
        self._dirty.add(path.parent)

    def delete_tree(self, rel: str) -> None:
        """Remove a directory and everything under it (already gone is fine)."""
        base = self.path(rel)
        with _writing(base, self.location):
            for dirpath, dirs, files in os.walk(base, topdown=False):
                for name in files:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(dirpath, name))
                for name in dirs:
                    with contextlib.suppress(FileNotFoundError, OSError):
                        os.rmdir(os.path.join(dirpath, name))
            with contextlib.suppress(FileNotFoundError, OSError):
                base.rmdir()
        self._dirty.add(base.parent)

    def where_missing(self) -> str | None:
        """Nothing more to say of a missing directory than its path."""
        return None


def _open_file(path: Path) -> int:
    """A descriptor of the regular file at ``path``, for reading. Opened without waiting: a
    FIFO planted under a store file's name would block the opener until a writer came; it is
    refused, as is a device (``/dev/zero`` never ends) or a directory (IsADirectoryError)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    mode = os.fstat(fd).st_mode
    if S_ISREG(mode):
        return fd
    os.close(fd)
    if S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    raise OSError(errno.EINVAL, "not a regular file", str(path))


def _stamp(info: Mapping[str, Any]) -> float:
    """The modification time in an fsspec ``info`` answer (S3's ``LastModified``)."""
    modified: Any = info.get("LastModified") or info.get("mtime") or info.get("created")
    return modified.timestamp() if hasattr(modified, "timestamp") else float(modified or 0)


@functools.cache
def _exit_safe_pool() -> type[ThreadPoolExecutor]:
    """The class :class:`_ExitSafePool`, made once, when a remote store first asks."""
    from concurrent.futures import Future, ThreadPoolExecutor  # noqa: PLC0415 - see the imports

    class _ExitSafePool(ThreadPoolExecutor):
        """The default thread pool of fsspec's event loop, which still runs work while the
        interpreter exits: ``concurrent.futures`` then refuses new work ("cannot schedule new
        futures after interpreter shutdown"), and aiohttp resolves a host name through this pool
        to connect. A write at exit (the SDK's ``atexit`` shutdown, the application's own exit
        hooks) would fail, the steps it carries lost; each call then gets a thread of its own."""

        def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
            try:
                return super().submit(fn, *args, **kwargs)
            except RuntimeError:
                done: Future[T] = Future()

                def run() -> None:
                    if done.set_running_or_notify_cancel():
                        try:
                            done.set_result(fn(*args, **kwargs))
                        except BaseException as exc:
                            done.set_exception(exc)

                threading.Thread(target=run, name="otel-replay-exit-io", daemon=True).start()
                return done

    return _ExitSafePool


def _exit_safe(fs: Any) -> None:
    """Give the event loop of the async file system ``fs`` (s3fs, gcsfs...) an
    :class:`_ExitSafePool` as its default pool, once."""
    import asyncio  # noqa: PLC0415 - only remote stores pay for importing asyncio

    loop = getattr(fs, "loop", None)
    if isinstance(loop, asyncio.AbstractEventLoop) and not getattr(loop, "_otel_replay", False):
        loop.set_default_executor(_exit_safe_pool()(thread_name_prefix="otel-replay-fsspec"))
        loop._otel_replay = True  # type: ignore[attr-defined]


class FsspecBackend:
    """A store at an fsspec URL (``s3://bucket/prefix``, ``gs://…``, ``memory://…``)."""

    local = False

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None) -> None:
        """Raises StoreError naming ``url`` when fsspec cannot serve it (an unknown
        protocol, a driver that is not installed, a malformed URL, a file system that cannot
        be opened there)."""
        import fsspec  # noqa: PLC0415 - only remote stores pay for importing fsspec

        self.location = url.rstrip("/")
        if not url.partition("://")[2].strip("/"):
            # fsspec would read "s3:" as a local path (a bucket named after the directory)
            raise StoreError(f"cannot open store {url}: the URL names no bucket or path")
        try:
            self.fs, root = fsspec.core.url_to_fs(self.location, **dict(storage_options or {}))
        except (ValueError, ImportError, OSError) as exc:
            raise StoreError(f"cannot open store {self.location}: {exc}") from None
        _exit_safe(self.fs)
        self._root = str(root).rstrip("/")

    def _path(self, rel: str) -> str:
        return f"{self._root}/{rel}" if rel else self._root

    def _fresh(self, rel: str) -> str:
        """The path of ``rel``, with no listing of its directory cached: s3fs answers a size
        (and a whole read, which asks for it) from a listing it cached, which does not know
        an object written since (FileNotFoundError for an object that exists)."""
        path = self._path(rel)
        self.fs.invalidate_cache(path)
        return path

    def read(self, rel: str) -> bytes:
        """The whole object; FileNotFoundError when absent. One GET, of the range from byte
        0: a read without a range first asks the size (see :meth:`_fresh`)."""
        try:
            return bytes(self.fs.cat_file(self._path(rel), start=0))
        except FileNotFoundError:
            raise
        except OSError:  # an empty object has no byte 0 (416): the size, then the read
            return bytes(self.fs.cat_file(self._fresh(rel)))

    def read_range(self, rel: str, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` (exclusive) of the object."""
        return bytes(self.fs.cat_file(self._path(rel), start=start, end=end))

    def read_tail(self, rel: str, size: int) -> bytes:
        """The last ``size`` bytes of the object (all of it when shorter): its size, then a
        ranged GET of explicit bounds. (A suffix range, ``bytes=-N``, would save the size
        lookup, but some S3-compatible servers serve the first N bytes for it.)"""
        path = self._fresh(rel)
        total = int(self.fs.size(path))
        return bytes(self.fs.cat_file(path, start=max(0, total - size), end=total))

    def size(self, rel: str) -> int:
        """Size of the object in bytes."""
        return int(self.fs.size(self._fresh(rel)))

    def stamp(self, rel: str) -> float:
        """When the object was last written, by the server's clock (Unix seconds);
        FileNotFoundError when absent."""
        return _stamp(self.fs.info(self._fresh(rel)))

    def exists(self, rel: str) -> bool:
        """Whether the object exists."""
        return bool(self.fs.exists(self._fresh(rel)))

    def publish(self, rel: str, data: bytes, *, replace: bool = True) -> bool:
        """PUT the object (atomic on object stores); with ``replace=False`` an existing one
        is kept and False is returned."""
        path = self._path(rel)
        with _writing(f"{self.location}/{rel}", self.location):
            if not replace and self.exists(rel):
                return False
            self.fs.pipe_file(path, data)
        return True

    def publish_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """:meth:`publish` (replacing) of several objects, one PUT each."""
        for rel, data in items:
            self.publish(rel, data)

    def sync(self) -> None:
        """Nothing to do: an object is durable once its PUT returns."""

    def where_missing(self) -> str | None:
        """The bucket (the URL's first part) when the server says it does not exist."""
        bucket = self._root.strip("/").split("/", 1)[0]
        try:
            return None if not bucket or self.fs.exists(bucket) else f"bucket {bucket!r}"
        except OSError:  # not allowed to ask, or the server is unreachable: say no more
            return None

    def listdir(self, rel: str) -> list[str]:
        """Names directly under ``rel`` (empty when there are none)."""
        path = self._path(rel)
        self.fs.invalidate_cache(path)
        try:
            entries = self.fs.ls(path, detail=False)
        except FileNotFoundError:
            return []
        return sorted(str(entry).rstrip("/").rsplit("/", 1)[-1] for entry in entries)

    def find(self, rel: str) -> dict[str, FileInfo]:
        """Every object under ``rel``: relative path -> (size, mtime)."""
        path = self._path(rel)
        self.fs.invalidate_cache(path)
        found: dict[str, FileInfo] = {}
        cut = len(self._root) + 1
        for name, info in self.fs.find(path, detail=True).items():
            found[str(name)[cut:]] = (int(info.get("size") or 0), _stamp(info))
        return found

    def delete(self, rel: str) -> None:
        """Remove the object (already gone is fine)."""
        with (
            _writing(f"{self.location}/{rel}", self.location),
            contextlib.suppress(FileNotFoundError),
        ):
            self.fs.rm_file(self._path(rel))

    def delete_tree(self, rel: str) -> None:
        """Remove every object under ``rel``."""
        with (
            _writing(f"{self.location}/{rel}", self.location),
            contextlib.suppress(FileNotFoundError),
        ):
            self.fs.rm(self._path(rel), recursive=True)
