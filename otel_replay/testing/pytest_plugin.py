"""The pytest plugin: the ``otel_replay`` marker runs a test against a recorded run (the
``replay_result`` fixture), or over a directory of bundles one test per bundle;
``--otel-replay-record`` records the bundles from live runs; ``replay_capture`` yields a
:class:`CaptureKit`.

See docs/pytest.md."""

from __future__ import annotations

import os
import shlex
from collections import Counter
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

if TYPE_CHECKING:
    from otel_replay.replay import ReplayResult
    from otel_replay.testing._kit import CaptureKit

MARKER = "otel_replay"
RECORD_OPTION = "--otel-replay-record"
_NOTE = "otel-replay"
"""The user property a test's recording note travels in (to the xdist controller too)."""
_PASSED = pytest.StashKey[bool]()
_NAMED = pytest.StashKey[Counter[Path]]()
"""How many collected tests name each bundle (recorded only when one does)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("otel-replay")
    group.addoption(
        RECORD_OPTION,
        choices=("none", "new", "all"),
        default="none",
        dest="otel_replay_record",
        help="record the bundles of tests marked otel_replay from a live run of the test: "
        "none (replay only; the default, for CI), new (bundles that do not exist yet), all "
        "(every bundle, replaced whole once the test passed; what changed is printed as "
        "`otel-replay diff` prints it)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(source, *, store=None, strict=True, timing='fast', clock=None, "
        "live_tools=None, override=None, inject=None, state=None, live_from=None, "
        "allow_writes=False): run the test against a recorded run (otel_replay.replaying); "
        "the replay_result fixture is what the replay found. A directory of bundles makes "
        "one test per bundle",
    )
    config.pluginmanager.register(_Notes(), "otel_replay_notes")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked with a directory of bundles becomes one test per bundle, named after
    it (``test_x[refund-loop]``)."""
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None or len(marker.args) != 1:
        return
    folder = _rooted(marker.args[0], metafunc.config.rootpath)
    if not isinstance(folder, str) or not _is_corpus(Path(folder)):
        return
    from otel_replay.replay.sources import is_bundle  # noqa: PLC0415

    bundles = sorted(
        path for path in Path(folder).iterdir() if not path.name.startswith(".") and is_bundle(path)
    )
    metafunc.parametrize(
        "otel_replay_source",
        [str(path) for path in bundles],
        ids=[path.name for path in bundles],
        indirect=True,
    )


def _is_corpus(folder: Path) -> bool:
    """A directory that is not a bundle but holds one (a hidden one is a bundle being
    written or replaced)."""
    from otel_replay.replay.sources import is_bundle  # noqa: PLC0415

    if not folder.is_dir() or is_bundle(folder):
        return False
    return any(not p.name.startswith(".") and is_bundle(p) for p in folder.iterdir())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("otel_replay_record") == "none":
        return
    config.stash[_NAMED] = Counter(path for path in map(_bundle_of, items) if path is not None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item,
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    if report.when == "call":
        item.stash[_PASSED] = report.passed
    return report


@pytest.fixture
def otel_replay_source(request: pytest.FixtureRequest) -> Any:
    """The source the test's ``otel_replay`` marker replays (for a marker over a directory of
    bundles, this test's bundle), a relative path made absolute under pytest's root; None
    for an unmarked test."""
    marker = request.node.get_closest_marker(MARKER)
    if hasattr(request, "param"):
        return request.param
    if marker is None or len(marker.args) != 1:
        return None
    return _rooted(marker.args[0], request.config.rootpath)


@pytest.fixture(autouse=True)
def _otel_replay_marked(
    request: pytest.FixtureRequest, otel_replay_source: Any
) -> Iterator[ReplayResult | None]:
    """The replay of a test marked ``otel_replay`` (None for the others); under
    ``--otel-replay-record``, its live run when it records."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:
        yield None
        return
    source = _checked(marker, otel_replay_source)
    bundle, why_not = _to_record(request, source)
    if bundle is not None:
        yield from _record(request, bundle)
        return
    if why_not:
        _note(request, f"{request.node.nodeid}: {why_not}")
    from otel_replay import replaying  # noqa: PLC0415
    from otel_replay.errors import OtelReplayError  # noqa: PLC0415

    problem: str | None
    try:
        replay = replaying(source, **marker.kwargs)
        result = replay.__enter__()
    except (OtelReplayError, OSError, TypeError) as exc:
        problem = str(exc)
    else:
        problem = None
    if problem is not None:  # failed outside the handler: one line, no chained traceback
        pytest.fail(
            f"otel-replay: cannot replay {source!r}: {problem}{_hint(request, source)}",
            pytrace=False,
        )
    try:
        yield result
    finally:
        replay.__exit__(None, None, None)


@pytest.fixture
def replay_result(_otel_replay_marked: ReplayResult | None) -> ReplayResult:
    """What the replay of this test's ``@pytest.mark.otel_replay(SOURCE)`` recording found
    (while the test records, its live run so far, every step identical)."""
    if _otel_replay_marked is None:
        pytest.fail(
            "replay_result needs the test marked @pytest.mark.otel_replay(SOURCE)",
            pytrace=False,
        )
    return _otel_replay_marked


def _item_source(item: pytest.Item, marker: pytest.Mark) -> Any:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "otel_replay_source" in callspec.params:
        return callspec.params["otel_replay_source"]
    return _rooted(marker.args[0], item.config.rootpath)


def _rooted(source: Any, root: Path) -> Any:
    """A relative path made absolute under ``root`` when it exists there, or names a
    directory to come (a bundle to record); a path-like object as text."""
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, str) or "://" in source or Path(source).is_absolute():
        return source
    rooted = root / source
    if rooted.exists() or ("/" in source and not Path(source).exists()):
        return str(rooted)
    return source


def _checked(marker: pytest.Mark, source: Any) -> Any:
    """``source`` when the marker gives one source of a type a replay takes; else the test
    fails, saying what it got."""
    if len(marker.args) != 1:
        pytest.fail(
            f"@pytest.mark.{MARKER} takes one source (a run id, a file, a URL), "
            f"got {len(marker.args)}",
            pytrace=False,
        )
    from otel_replay.replay import Run  # noqa: PLC0415

    if isinstance(source, bytes) or not isinstance(source, str | Run):
        shown = repr(source) if len(repr(source)) <= 80 else repr(source)[:79] + "…"
        pytest.fail(
            f"@pytest.mark.{MARKER} takes a source (a run id, a path, a URL or a Run), "
            f"got {type(source).__name__} {shown}",
            pytrace=False,
        )
    return source


def _hint(request: pytest.FixtureRequest, source: Any) -> str:
    """What to do about a bundle that is not there yet: record it, from this test alone when
    other tests name it too (a bundle is recorded from one test)."""
    from otel_replay.testing._record import bundle_path  # noqa: PLC0415

    path = bundle_path(source)
    if path is None or path.exists():
        return ""
    if sum(_bundle_of(item) == path.resolve() for item in request.session.items) > 1:
        test = shlex.quote(request.node.nodeid)
        return f" (record it from this test alone: pytest {RECORD_OPTION}=new {test})"
    return f" (record it: pytest {RECORD_OPTION}=new)"


def _bundle_of(item: pytest.Item) -> Path | None:
    """The bundle directory ``item``'s marker names (resolved), None when it names none."""
    from otel_replay.testing._record import bundle_path  # noqa: PLC0415

    marker = item.get_closest_marker(MARKER)
    if marker is None or len(marker.args) != 1:
        return None
    path = bundle_path(_item_source(item, marker))
    return None if path is None else path.resolve()


def _to_record(request: pytest.FixtureRequest, source: Any) -> tuple[Path | None, str]:
    """The bundle this test records under ``--otel-replay-record`` (None: it replays), and
    why a test the option asked to record replays instead (empty: it was not asked)."""
    mode = request.config.getoption("otel_replay_record")
    if mode == "none":
        return None, ""
    from otel_replay.testing._record import bundle_path  # noqa: PLC0415

    path = bundle_path(source)
    if path is None:
        return None, f"replayed, not recorded: {source!r} is not a bundle directory"
    if mode == "new" and path.exists() and any(path.iterdir()):
        return None, ""
    named = request.config.stash.get(_NAMED, Counter())[path.resolve()]
    if named > 1:
        return None, (
            f"replayed, not recorded: {named} tests name the bundle {path} "
            "(record it from one test of its own)"
        )
    return path, ""


def _record(request: pytest.FixtureRequest, bundle: Path) -> Iterator[ReplayResult]:
    """The test run live and recorded; once it passed, its bundle written in place."""
    from otel_replay.errors import OtelReplayError  # noqa: PLC0415
    from otel_replay.testing._record import LiveRecording, LiveResult, save  # noqa: PLC0415

    factory: pytest.TempPathFactory = request.getfixturevalue("tmp_path_factory")
    scratch = factory.mktemp("otel-replay-record")
    with LiveRecording(scratch / "store") as recording:
        yield cast("ReplayResult", LiveResult(recording))
    test = request.node.nodeid
    if not request.node.stash.get(_PASSED, False):
        _note(request, f"{test}: not recorded: the test did not pass (the bundle is as it was)")
        return
    try:
        saved = save(recording, bundle, scratch)
    except (OtelReplayError, OSError) as exc:
        pytest.fail(f"otel-replay: cannot record {bundle}: {exc}", pytrace=False)
    steps = f"{saved.steps} step{'' if saved.steps == 1 else 's'}"
    if not saved.replaced:
        _note(request, f"{test}: recorded {bundle} ({steps})")
    elif saved.identical:
        _note(request, f"{test}: re-recorded {bundle}: unchanged ({steps})")
    else:
        _note(request, f"{test}: re-recorded {bundle}:\n{saved.diff}")


def _note(request: pytest.FixtureRequest, text: str) -> None:
    """A line for the session's otel-replay summary (from an xdist worker too)."""
    request.node.user_properties.append((_NOTE, text))


class _Notes:
    """Gathers the tests' recording notes and prints them after the run."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self.notes.extend(str(text) for name, text in report.user_properties if name == _NOTE)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.notes:
            terminalreporter.section(_NOTE)
            for note in self.notes:
                terminalreporter.write_line(note)


@pytest.fixture
def replay_capture() -> Iterator[CaptureKit]:
    """httpx and httpx2 instrumented by otel-replay into in-memory span and metric sinks."""
    from otel_replay.testing._kit import CaptureKit  # noqa: PLC0415

    with CaptureKit() as kit:
        yield kit


@pytest.fixture
def replay_capture_deterministic() -> Iterator[CaptureKit]:
    """``replay_capture`` with span and trace ids 1, 2, 3... and a clock that steps one
    second per reading (span, event, step and run id times), for whole-span assertions."""
    from otel_replay.testing._kit import CaptureKit  # noqa: PLC0415

    with CaptureKit(deterministic=True) as kit:
        yield kit
