"""Errors raised by otel-replay. The library raises; only the CLI turns them into one line.

    OtelReplayError
    ├── ConfigError(ValueError)        a setting from the environment or an argument is invalid
    ├── CodecError(ValueError)         a provider body could not be decoded
    ├── StoreError                     the store cannot do what was asked
    │   ├── StoreNotFoundError(FileNotFoundError)   no store at that location (and create=False)
    │   ├── StoreNotWritableError(PermissionError)  the store location cannot be written
    │   ├── StoreFullError                          no space left on the device holding it
    │   ├── StoreFormatError(ValueError)            unknown, newer or missing format version
    │   ├── CorruptBlobError(ValueError)            stored bytes fail their checksum or hash
    │   ├── CorruptIndexError                       index.sqlite cannot be read
    │   └── RunNotFoundError(LookupError)           no such run (or step) in the store
    ├── SourceError(ValueError)        a replay source is missing, corrupt or has nothing to replay
    ├── NetworkBlockedError(ConnectionRefusedError)  strict replay refused a socket
    ├── ToolContractError(ValueError)  a tool's arguments or result break its JSON Schema
    └── RetryOverflowError(RuntimeError)  a tool's retry budget ran out
        └── CircuitOpenError              the tool's circuit is open: the call failed fast

    RecordedError(Exception)           a recorded exception whose class cannot be rebuilt
    InjectedToolError(RuntimeError)    a tool failure a fork injected (--inject N=tool:error)

    UnmatchedRequestError(BaseException)   strict replay met a request the recording lacks
    ├── UnmatchedConnectionError(ConnectionError)  the same, below urllib3 or aiohttp
    │   └── UnmatchedAiohttpRequestError(aiohttp.ClientConnectionError)  made on first use
    └── UnmatchedInPoolError(Exception)    the same, in a multiprocessing.Pool task

    RecordedValueError(BaseException)      a recorded value cannot be given back as the call's
    └── RecordedValueInPoolError(Exception)  the same, in a multiprocessing.Pool task

The BaseException trees stop a replayed program that would catch ``Exception`` and carry on."""

from __future__ import annotations

import threading

__all__ = [
    "CircuitOpenError",
    "CodecError",
    "ConfigError",
    "CorruptBlobError",
    "CorruptIndexError",
    "InjectedToolError",
    "NetworkBlockedError",
    "OtelReplayError",
    "RecordedError",
    "RecordedValueError",
    "RecordedValueInPoolError",
    "RetryOverflowError",
    "RunNotFoundError",
    "SourceError",
    "StoreError",
    "StoreFormatError",
    "StoreFullError",
    "StoreNotFoundError",
    "StoreNotWritableError",
    "ToolContractError",
    "UnmatchedConnectionError",
    "UnmatchedInPoolError",
    "UnmatchedRequestError",
]


class OtelReplayError(Exception):
    """Base of every error otel-replay raises on purpose."""


class ConfigError(OtelReplayError, ValueError):
    """A setting (environment variable or argument) has a value we cannot use.

    The message names the setting and the offending value, never a secret.
    """


class CodecError(OtelReplayError, ValueError):
    """A request or response body does not have the shape its provider codec expects."""


class StoreError(OtelReplayError):
    """The store cannot do what was asked; the message names the path, run or blob."""


class StoreNotFoundError(StoreError, FileNotFoundError):
    """There is no store at the given location and the caller asked not to create one."""


class StoreNotWritableError(StoreError, PermissionError):
    """The store location (or a file inside it) cannot be created or written."""


class StoreFullError(StoreError):
    """The device holding the store (or a remote store's index cache) has no space left.

    Nothing stored is lost: the write that failed so is retried once space is freed.
    """


class StoreFormatError(StoreError, ValueError):
    """The store's ``FORMAT`` is missing, unknown or newer than this version understands.

    The message says which version was found, which this version reads, and how to migrate.
    Nothing in the store is changed.
    """


class CorruptBlobError(StoreError, ValueError):
    """Stored bytes fail their checksum, or reassembled bytes fail their sha256.

    The message names the blob (``sha256:<hex>`` when known) and the pack file holding it.
    """


class CorruptIndexError(StoreError):
    """``index.sqlite`` cannot be read (truncated, not a database, or a newer schema).

    The index can be rebuilt from the packs with ``Store.rebuild_index()``; it is never
    rebuilt without being asked.
    """


class RunNotFoundError(StoreError, LookupError):
    """The store has no run (or no step) with that id."""


class SourceError(OtelReplayError, ValueError):
    """A replay source (run id, OTLP file, URL) is missing, truncated or corrupt, has an
    unknown format version, or holds no replayable step. The message names the source."""


class NetworkBlockedError(OtelReplayError, ConnectionRefusedError):
    """Strict replay refused a network operation (a connect or a name lookup) that did not go
    through the replay transport. The message names the address."""


class ToolContractError(OtelReplayError, ValueError):
    """A tool was called with arguments, or returned a result, that its JSON Schema refuses.

    ``code`` is ``invalid_arguments`` or ``invalid_result``; ``path`` the JSON path of the
    offending value (``$.order.id``; ``$`` for the whole); ``message`` what is wrong there. The
    step records it as its ``error.type``.
    """

    def __init__(self, tool: str, code: str, path: str, message: str) -> None:
        super().__init__(f"tool {tool!r}: {code} at {path}: {message}")
        self.tool, self.code, self.path, self.message = tool, code, path, message

    def __reduce__(self) -> tuple[type, tuple[str, str, str, str]]:
        return type(self), (self.tool, self.code, self.path, self.message)


class RetryOverflowError(OtelReplayError, RuntimeError):
    """A tool's calls went past its retry budget (``@otel_replay.tool(retries=Budget(...))``):
    ``attempts`` attempts of tool ``tool`` failed, the last with ``last_error`` (its type and
    message; the exception itself is the ``__cause__``). Its step and the run it fails are
    labelled ``replay.failure.category`` ``retry_overflow``."""

    def __init__(self, tool: str, attempts: int, last_error: str) -> None:
        super().__init__(
            f"tool {tool!r} failed {'the' if attempts == 1 else 'all'} {attempts} "
            f"attempt{'' if attempts == 1 else 's'} its retry budget allows; "
            f"last error: {last_error}"
        )
        self.tool, self.attempts, self.last_error = tool, attempts, last_error

    def __reduce__(self) -> tuple[type, tuple[str, int, str]]:
        return type(self), (self.tool, self.attempts, self.last_error)


class CircuitOpenError(RetryOverflowError):
    """Tool ``tool`` failed ``failures`` times in a row, across calls, so its circuit is open:
    the call failed fast, without running the tool, and the next call runs in ``retry_in``
    seconds (the budget's ``circuit_cooldown``). A step of its own, so a replay fails fast
    where the recording did. Rebuilt by a replay, it keeps its message only."""

    def __init__(self, tool: str, failures: int, retry_in: float) -> None:
        RuntimeError.__init__(
            self,
            f"tool {tool!r} is failing fast: its circuit opened after {failures} failures in "
            f"a row; it lets a call through again in {retry_in:.1f} s",
        )
        self.tool, self.failures, self.retry_in = tool, failures, retry_in
        self.attempts, self.last_error = 0, ""

    def __reduce__(self) -> tuple[type, tuple[str, int, float]]:  # type: ignore[override]
        return type(self), (self.tool, self.failures, self.retry_in)


class RecordedError(Exception):
    """Raised on replay in place of a recorded exception whose class cannot be imported or
    built again. ``type_name`` is the recorded class's qualified name; the message is the
    recorded one."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name, self.message = type_name, message


class InjectedToolError(RuntimeError):
    """Raised from a tool's call, in place of its recorded result, by a fork that injects a
    tool failure at its step (``--inject N=tool:error[:MESSAGE]``): what the tool raising
    would do, for the program to handle as it handles its tools' errors."""


class UnmatchedRequestError(BaseException):
    """Strict replay met a request that no recorded step matches.

    It derives from BaseException, as pytest's outcome exceptions do, because SDKs catch
    ``Exception`` around their transport and retry or re-wrap it: the application must stop at
    this request with this message, not after retries under a generic connection error. The
    message lists the closest recorded requests and the fields that differ.
    """


class UnmatchedConnectionError(UnmatchedRequestError, ConnectionError):
    """Strict replay met a request that no recorded step matches, in a library whose callers
    expect a connection error instead: urllib3 (so requests raises its ``ConnectionError``
    and botocore its connection error around it) and aiohttp (where it is also an
    ``aiohttp.ClientConnectionError``). Unlike its base, ``except Exception`` catches it, as
    the library's own callers would catch a refused connection; the replay still reports the
    request as unmatched. The message is the same."""


class UnmatchedInPoolError(UnmatchedRequestError, Exception):
    """Strict replay met a request that no recorded step matches, in a task of a
    ``multiprocessing.Pool`` worker. The worker catches ``Exception`` around each task and
    nothing else: its base alone would end the worker and leave the pool waiting forever for
    the task's result. ``except Exception`` catches this one (an SDK may retry it first), and
    the pool hands it to the caller; the replay still reports the request as unmatched. The
    message is the same."""


class RecordedValueError(BaseException):
    """A recorded step's value cannot be given back as what its call returns: the recording
    holds a result that is not JSON, or not what the call must rebuild (a checkpoint that is
    no checkpoint tuple, a store item without its key).

    ``step_name`` is the step's kind and name (``checkpoint langgraph.get_tuple``), ``what``
    what is wrong; the message is ``run RUN step N (NAME): WHAT``. The replay stops there: the
    ``replay`` verb exits 2, ``replaying()`` raises it with outcome ``bad_recording``. A
    BaseException, so no framework's ``except Exception`` carries on with a value the
    recording does not hold.
    """

    def __init__(self, run_id: str, step_index: int, step_name: str, what: str) -> None:
        super().__init__(f"run {run_id} step {step_index} ({step_name}): {what}")
        self.run_id, self.step_index, self.step_name, self.what = (
            run_id,
            step_index,
            step_name,
            what,
        )

    def __reduce__(self) -> tuple[type, tuple[str, int, str, str]]:
        return type(self), (self.run_id, self.step_index, self.step_name, self.what)


class RecordedValueInPoolError(RecordedValueError, Exception):
    """:class:`RecordedValueError` in a task of a ``multiprocessing.Pool`` worker, which
    catches ``Exception`` around each task and nothing else (its base alone would end the
    worker and leave the pool waiting forever); the pool hands it to the caller."""


_AIOHTTP_ERROR = "UnmatchedAiohttpRequestError"
_made_lock = threading.Lock()


def __getattr__(name: str) -> type[UnmatchedConnectionError]:
    """``UnmatchedAiohttpRequestError``, made on first use: it derives from
    ``aiohttp.ClientConnectionError``, and importing this module must not import aiohttp.
    Once made it is this module's attribute like any other, under that name."""
    if name != _AIOHTTP_ERROR:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        import aiohttp  # noqa: PLC0415 - optional, and costly to import
    except ImportError:
        raise AttributeError(f"{__name__}.{name} needs aiohttp, which is not installed") from None
    with _made_lock:
        made: type[UnmatchedConnectionError] | None = globals().get(name)
        if made is None:
            made = type(
                name,
                (UnmatchedConnectionError, aiohttp.ClientConnectionError),
                {
                    "__module__": __name__,
                    "__qualname__": name,
                    "__doc__": "Strict replay met a request that no recorded step matches, "
                    "in aiohttp, whose callers expect an ``aiohttp.ClientConnectionError`` "
                    "(see :class:`UnmatchedConnectionError`). The message is the same.",
                },
            )
            globals()[name] = made
    return made
