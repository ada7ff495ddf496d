"""SIGTERM (and a default SIGHUP): write and send what the process holds, then do what the
signal would have done."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from queue import SimpleQueue
from types import FrameType
from typing import Any, Protocol

from otel_replay.runs import cut_in_flight, cut_off, exiting

__all__ = ["before_wait", "install", "keep_off_this_thread", "released", "uninstall"]

_log = logging.getLogger("otel_replay.export")


class _Flushable(Protocol):
    def _flush_on_signal(self, timeout_s: float) -> None: ...


CUT_SHARE = 0.25
"""The share of the flush timeout the steps in flight may take to end: the rest is for
writing what is held and ending the traces."""

_exporters: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
"""Live exporters, each with its flush timeout in seconds."""
_previous: dict[int, Any] = {}
"""Per signal we handle, the disposition ours replaced."""
_installed = False
_handling = False
_dying: int | None = None
"""The signal this process dies of once the handler has written what it holds: a fork meanwhile
(another thread's: a Pool replacing the workers the same signal killed) dies of it too."""
_before_wait = False
"""True while the main thread pushes what the span processors hold before it waits
(:func:`before_wait`)."""


_STOPPING = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, name)
)
"""The signals that stop a process, whose handlers (ours, the program's, Python's
KeyboardInterrupt) only the main thread runs."""


def keep_off_this_thread() -> None:
    """Block :data:`_STOPPING` in the calling thread, one the recorder starts (not the main
    thread), and so in the threads it starts in turn (the store's).

    The kernel gives a signal sent to the process to any thread that does not block it, not
    only to the main thread, which it wakes; another thread that changes its signal mask
    first (as starting a thread does) can take it instead. CPython then only notes it: the
    main thread runs the Python handler when it next runs Python code, and if it sleeps
    (an agent waiting for its next task) it is never woken, the handler never runs, and the
    process ignores SIGTERM. Blocked here, the signal waits for the main thread."""
    if (
        _STOPPING
        and hasattr(signal, "pthread_sigmask")
        and threading.current_thread() is not threading.main_thread()
    ):
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)


class _Helper:
    """A daemon thread that runs, off the signal handler, the work that takes locks.

    Started with the handler, not by it: a thread started in the handler may fail to start
    on a loaded host (which raised out of the handler, and the process lived on), and goes
    through ``Thread.start``, which other libraries wrap."""

    def __init__(self, name: str) -> None:
        self._jobs: SimpleQueue[tuple[Callable[[], object], threading.Event]] = SimpleQueue()
        self._pid = os.getpid()
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    @property
    def usable(self) -> bool:
        """False in a forked child, where the thread does not exist."""
        return self._pid == os.getpid()

    def run(self, job: Callable[[], object], timeout_s: float) -> bool:
        """Run ``job`` on the helper thread; True when it finished within ``timeout_s``."""
        done = threading.Event()
        self._jobs.put((job, done))
        return done.wait(timeout_s)

    def _serve(self) -> None:
        keep_off_this_thread()
        while True:
            job, done = self._jobs.get()
            try:
                job()
            except Exception as exc:  # never let ours stand in the way of the signal
                _log.debug("otel-replay: ending the traces on SIGTERM failed: %r", exc)
            finally:
                done.set()


_WAKE: int | None = getattr(signal, "SIGRTMAX", None)
if _WAKE is not None:
    _WAKE -= 2  # a real-time signal nothing else uses, whose only work is to wake
_relay_fds: tuple[int, int, int] | None = None
"""The process (pid) whose relay holds the wakeup fd, and the pipe's read and write ends."""


def _woken(signum: int, frame: FrameType | None) -> None:
    """The wake signal's handler: nothing; being interrupted was the point."""


def _start_relay() -> None:
    """When a thread other than the main one takes a stopping signal, wake the main thread.

    CPython notes a signal in whichever thread the kernel chose and runs the Python handler
    in the main thread, at its next bytecode: asleep (an agent waiting for its next task) it
    would not run it before it woke. Every caught signal is written to the wakeup fd; a relay
    thread reads it and sends the main thread a real-time signal of its own, whose arrival
    ends the main thread's wait (then the pending handlers run, ours among them). A wakeup fd
    the program already set (asyncio's: its loop wakes itself) is left alone, as is a wake
    signal the program handles. Main thread only."""
    global _relay_fds  # noqa: PLW0603 - one relay per process
    wake = _WAKE
    if wake is None or not hasattr(signal, "pthread_kill"):
        return
    if _relay_fds is not None and _relay_fds[0] == os.getpid():
        return
    inherited = _relay_fds[1:] if _relay_fds is not None else (-1, -1)  # a forked child's
    try:
        if signal.getsignal(wake) not in (signal.SIG_DFL, _woken):
            return
        read, write = os.pipe()
    except (ValueError, OSError):
        return
    try:
        os.set_blocking(write, False)
        previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        if previous not in (-1, inherited[1]):
            signal.set_wakeup_fd(previous)  # the program's
            raise ValueError(previous)
        signal.signal(wake, _woken)
        main = threading.main_thread().ident
        threading.Thread(
            target=_relay, args=(read, main, wake), name="otel-replay-relay", daemon=True
        ).start()
    except (ValueError, OSError, RuntimeError):
        os.close(read)
        os.close(write)
        return
    for fd in inherited:
        if fd != -1:
            with contextlib.suppress(OSError):
                os.close(fd)
    _relay_fds = (os.getpid(), read, write)


def _relay(read: int, main: int, wake: int) -> None:
    keep_off_this_thread()
    stopping = {int(s) for s in _STOPPING}
    with contextlib.suppress(OSError):
        while data := os.read(read, 512):
            if not stopping.isdisjoint(data):
                signal.pthread_kill(main, wake)
    os.close(read)


def _stop_relay() -> None:
    """Give the wakeup fd back (where it is still ours); the relay then ends."""
    global _relay_fds  # noqa: PLW0603
    if _relay_fds is None or _relay_fds[0] != os.getpid():
        return
    write = _relay_fds[2]
    try:
        current = signal.set_wakeup_fd(-1)
        if current != write:
            signal.set_wakeup_fd(current)
            return
        os.close(write)
    except (ValueError, OSError):
        return
    _relay_fds = None


_helper: _Helper | None = None
"""Ends the traces and flushes the providers (:func:`cut_off`)."""
_cutter: _Helper | None = None
"""Ends the steps in flight (:func:`_cut_steps`): a thread of its own, since it may be stuck
for good on a lock the interrupted thread holds, and the traces must still end after."""


def _start_helpers() -> None:
    global _helper, _cutter  # noqa: PLW0603 - one pair per process
    if _helper is None or not _helper.usable:
        _helper = _Helper("otel-replay-sigterm")
    if _cutter is None or not _cutter.usable:
        _cutter = _Helper("otel-replay-cut")
    _start_relay()


_mask_before_fork: set[int | signal.Signals] | None = None
"""The forking thread's signal mask before :func:`_before_fork` blocked ours."""


def _before_fork() -> None:
    # A signal sent to a child before it first runs (Pool.terminate right after a worker was
    # forked, on a busy machine) reaches CPython's C handler, and the child's reset at start
    # (PyOS_AfterFork_Child) clears it: with ours in place of the default, the signal would be
    # lost and the worker wait on its queue for ever. Blocked across the fork, it stays
    # pending in the kernel until the child has reset and unblocks it.
    global _mask_before_fork  # noqa: PLW0603 - set and read by one fork, under the GIL
    if _installed:
        _mask_before_fork = signal.pthread_sigmask(signal.SIG_BLOCK, list(_previous))


def _restore_mask() -> None:
    global _mask_before_fork  # noqa: PLW0603
    if _mask_before_fork is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, _mask_before_fork)
        _mask_before_fork = None


def _after_fork_in_child() -> None:
    global _dying
    dying, _dying = _dying, None
    if dying is not None:
        # Under the signal's default this process would be dead and the child never forked:
        # left alive, it would run work queued for a parent that is gone (model calls, tool
        # writes). It dies of the signal, as its parent is about to.
        signal.signal(dying, signal.SIG_DFL)
        _restore_mask()
        os.kill(os.getpid(), dying)
    try:
        if _installed:
            _start_helpers()
    finally:
        _restore_mask()  # a signal that came meanwhile is handled now, helper ready


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork, after_in_parent=_restore_mask, after_in_child=_after_fork_in_child
    )


def install(exporter: _Flushable, timeout_s: float) -> bool:
    """Flush ``exporter`` (within ``timeout_s``) on SIGTERM, and on SIGHUP where nothing else
    handles it, installing the handler once; False when signals cannot be handled here (not
    the main thread, or no SIGTERM on this platform)."""
    global _installed  # noqa: PLW0603 - one handler per process
    if not hasattr(signal, "SIGTERM") or threading.current_thread() is not threading.main_thread():
        _log.debug("otel-replay: not in the main thread; no SIGTERM handler installed")
        return False
    if not _installed:
        try:
            _previous[signal.SIGTERM] = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, _on_sigterm)
        except (ValueError, OSError) as exc:
            _log.debug("otel-replay: cannot handle SIGTERM here: %s", exc)
            return False
        _install_hangup()
        _installed = True
        _start_helpers()
    _exporters[exporter] = timeout_s
    return True


@contextlib.contextmanager
def released() -> Iterator[None]:
    """Within the block, the signals we handle have the dispositions ours replaced (SIGTERM
    kills at once); ours again after. Only in the main thread: elsewhere it does nothing."""
    if not _installed or threading.current_thread() is not threading.main_thread():
        yield
        return
    ours = [signum for signum in _previous if signal.getsignal(signum) is _on_sigterm]
    try:
        for signum in ours:
            previous = _previous[signum]
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        yield
    finally:
        for signum in ours:
            if signum in _previous:
                signal.signal(signum, _on_sigterm)


@contextlib.contextmanager
def before_wait() -> Iterator[None]:
    """Within the block, the main thread pushes what the span processors hold before it waits
    (a worker going idle, which ``Pool.__exit__`` terminates). SIGTERM there writes what is
    held and dies, as in an exit flush: flushing the providers again would wait, for the whole
    flush timeout, on the lock the interrupted flush holds."""
    global _before_wait  # noqa: PLW0603 - the main thread's own flag
    _before_wait = True
    try:
        yield
    finally:
        _before_wait = False


def _install_hangup() -> None:
    # A closed terminal (an SSH session dropped) kills with SIGHUP, as uncleanly as SIGTERM.
    # Only its default is taken over: under nohup it is ignored, and a program's own handler
    # is the program's business.
    hangup = getattr(signal, "SIGHUP", None)
    if hangup is None:
        return
    try:
        if signal.getsignal(hangup) == signal.SIG_DFL:
            signal.signal(hangup, _on_sigterm)
            _previous[hangup] = signal.SIG_DFL
    except (ValueError, OSError) as exc:
        _log.debug("otel-replay: cannot handle SIGHUP here: %s", exc)


def uninstall(exporter: _Flushable) -> None:
    """Stop flushing ``exporter``; with none left, put the previous handlers back (where ours
    is still the installed one, and this is the main thread)."""
    global _installed  # noqa: PLW0603
    _exporters.pop(exporter, None)
    if _exporters or not _installed:
        return
    if threading.current_thread() is not threading.main_thread():
        return  # harmless: with no exporter left our handler only chains
    for signum, previous in list(_previous.items()):
        try:
            if signal.getsignal(signum) is _on_sigterm:
                signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        except (ValueError, OSError):
            return
        del _previous[signum]
    _stop_relay()
    _installed = False


def _cut_steps(cutter: _Helper, cause: str, timeout_s: float) -> bool:
    """End the steps in flight as cut off by ``cause``, within ``timeout_s``; True when there
    were some (or when it took too long to say).

    On the cutter, not the helper: ending a step takes the hand-off's lock, which the
    interrupted thread may hold (it would then never be released), and a helper stuck on it
    could not end the traces after."""
    cut: list[int] = []
    cutter.run(lambda: cut.append(cut_in_flight(cause)), timeout_s)
    return not cut or cut[0] > 0


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    global _handling, _dying  # noqa: PLW0603 - the main thread's own flags
    if _handling:
        return  # a signal again while we handle the first: that one still ends as it should
    _handling = True
    previous = _previous.get(signum, signal.SIG_DFL)
    dies = not callable(previous) and previous != signal.SIG_IGN
    if dies:
        _dying = signum
    try:
        _write_and_end(signum, dies)
    except Exception as exc:  # never let ours stand in the way of the signal
        _log.debug("otel-replay: handling %s failed: %r", signum, exc)
    finally:
        _handling = False
    if callable(previous):
        previous(signum, frame)
    elif dies:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _write_and_end(signum: int, dies: bool) -> None:
    """Write what every exporter holds; when the process ``dies`` of ``signum``, also end
    the steps in flight and the traces, and write what that ended. Within the exporters'
    longest flush timeout."""
    exporters = list(_exporters.items())
    deadline = time.monotonic() + max((t for _, t in exporters), default=0.0)

    def left() -> float:
        return max(0.0, deadline - time.monotonic())

    def write_all() -> None:
        for exporter, own in exporters:
            try:
                exporter._flush_on_signal(min(own, left()))
            except Exception as exc:  # never let ours stand in the way of the signal
                _log.debug("otel-replay: flushing on SIGTERM failed: %r", exc)

    write_all()  # the steps first: they are what a replay needs
    helper, cutter = _helper, _cutter
    # A process already in its exit flush (a Pool worker that Pool.terminate signals as
    # it leaves) has ended its traces; flushing the providers again would wait on the
    # lock that the interrupted flush holds, for the whole timeout.
    if not (
        dies
        and exporters
        and helper is not None
        and helper.usable
        and cutter is not None
        and cutter.usable
        and left() > 0
        and not exiting()
        and not _before_wait
    ):
        return
    cause = signal.Signals(signum).name
    steps_cut = _cut_steps(cutter, cause, left() * CUT_SHARE)
    if helper.run(lambda: cut_off(cause, left(), steps_cut), left()):
        # What the providers' flush handed the exporters (the root span), and the steps
        # other threads finished meanwhile.
        write_all()
    else:
        _log.debug("otel-replay: ending the traces on %s timed out", cause)
