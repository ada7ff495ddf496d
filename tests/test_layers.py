"""Which part of the package imports which, read from its source.

The package has stages (``capture``, ``store``, ``export``, ``replay``, ``report``, ``triage``,
``cli``, ``testing``), homes of concepts several stages share (``codecs``, ``redact``, ``envelope``,
``runs``) and top-level shared modules (``step``, ``settings``, ``errors``, ``attributes``,
``_canonical``…). Imports under ``if TYPE_CHECKING:`` do not count. The rules:

* the stages form a DAG (:data:`ALLOWED`); homes and shared modules import no stage;
* privacy: a module imports another stage's or home's modules only through its public face
  (no ``_``-prefixed module of another part); top-level ``otel_replay/_x.py`` is shared;
* no import cycle anywhere, imports inside functions included, but for :data:`CYCLE_BREAKS`;
* importing a stage reads no setting and loads nothing after it.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import otel_replay
from otel_replay.settings import CLI_CHANNEL, SETTINGS

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(otel_replay.__file__).parent

STAGES = ("capture", "store", "export", "replay", "report", "triage", "cli", "testing")
HOMES = ("codecs", "redact", "envelope", "runs")
"""Packages that are the public home of a concept several stages share."""
ALLOWED: dict[str, frozenset[str]] = {
    "capture": frozenset(),
    "store": frozenset(),
    "export": frozenset({"store"}),
    "replay": frozenset({"capture", "store", "export"}),
    "report": frozenset({"store", "replay"}),
    "triage": frozenset({"store", "replay"}),
    "cli": frozenset({"capture", "store", "export", "replay", "report", "triage"}),
    "testing": frozenset({"capture", "store", "export", "replay", "cli"}),
}
"""The stages each stage may import (besides the shared modules)."""

CYCLE_BREAKS = {("otel_replay.capture.instrumentor", "otel_replay.replay")}
"""Imports against the order, allowed inside a function only. The instrumentor, loaded by
``opentelemetry-instrument`` in replay mode, hands the process to the replay (there is no
other way in under ``opentelemetry-instrument``); the replay instruments the process it
replays with that instrumentor."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> frozenset[str]:
    return frozenset(_module_name(path) for path in PACKAGE.rglob("*.py"))


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    # ``from otel_replay import settings`` imports the module otel_replay.settings; ``from
    # otel_replay.runs import run`` imports the package (a name of its public face)
    targets = {f"{base}.{alias.name}" for alias in node.names} & MODULES
    if len(targets) < len(node.names):
        targets.add(base)
    return sorted(targets)


MODULES = _modules()


def _imports() -> list[tuple[str, str, bool]]:
    """Every ``(importer, imported, inside_a_function)`` within the package."""
    found: list[tuple[str, str, bool]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        _walk(tree.body, _module_name(path), path.name == "__init__.py", False, found)
    return found


def _walk(
    nodes: list[ast.stmt],
    module: str,
    is_package: bool,
    in_function: bool,
    found: list[tuple[str, str, bool]],
) -> None:
    for node in nodes:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            _walk(node.orelse, module, is_package, in_function, found)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for target in _targets(node, module, is_package):
                if target.startswith("otel_replay."):
                    found.append((module, target, in_function))
        else:
            inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    _walk([child], module, is_package, inner, found)
                elif isinstance(child, ast.ExceptHandler | ast.match_case):
                    _walk(child.body, module, is_package, inner, found)


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


def _home(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in HOMES else None


def test_the_rule_is_acyclic() -> None:
    done: set[str] = set()
    while len(done) < len(ALLOWED):
        ready = {s for s, deps in ALLOWED.items() if s not in done and deps <= done}
        assert ready, f"ALLOWED has a cycle among {set(ALLOWED) - done}"
        done |= ready


def test_stages_import_only_the_stages_before_them() -> None:
    imports = _imports()
    assert len(imports) > 100, "the walk found the package's imports"
    wrong = []
    for importer, imported, in_function in imports:
        source, target = _stage(importer), _stage(imported)
        if source is None or target is None or source == target or target in ALLOWED[source]:
            continue
        if in_function and (importer, imported) in CYCLE_BREAKS:
            continue
        wrong.append(f"{importer} imports {imported}" + (" (in a function)" if in_function else ""))
    assert wrong == []


def test_shared_modules_import_no_stage() -> None:
    imports = _imports()
    assert {_home(importer) for importer, _, _ in imports} >= set(HOMES)
    wrong = [
        f"{importer} imports {imported}"
        for importer, imported, _ in imports
        if _stage(importer) is None and _stage(imported)
    ]
    assert wrong == []


def _part(module: str) -> str | None:
    return _stage(module) or _home(module)


def test_parts_import_each_other_only_by_their_public_faces() -> None:
    wrong = sorted(
        {
            f"{importer} imports {imported}"
            for importer, imported, _ in _imports()
            if _part(imported)
            and _part(importer) != _part(imported)
            and any(part.startswith("_") for part in imported.split(".")[2:])
        }
    )
    assert wrong == []


def _cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
        graph.setdefault(target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for after in graph[node]:
            if after not in index:
                visit(after)
                low[node] = min(low[node], low[after])
            elif after in stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            component = []
            while (member := stack.pop()) != node:
                component.append(member)
            if component:
                found.append(sorted([node, *component]))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_even_inside_functions() -> None:
    edges = {
        (importer, imported)
        for importer, imported, in_function in _imports()
        if importer != imported and not (in_function and (importer, imported) in CYCLE_BREAKS)
    }
    assert _cycles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}) == [["a", "b", "c"]]
    assert _cycles(edges) == []


def test_replay_imports_export_and_the_instrumentor_only_in_its_boot() -> None:
    at_import = [
        f"{importer} imports {imported}"
        for importer, imported, in_function in _imports()
        if not in_function
        and _stage(importer) == "replay"
        and (_stage(imported) == "export" or imported.startswith("otel_replay.capture.instrument"))
    ]
    assert at_import == []


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environ["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-c", code],
        env=environ | env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.subprocess
def test_importing_reads_no_settings() -> None:
    """Every ``OTEL_REPLAY_*`` variable invalid: importing still works (settings are read when
    something is instrumented, exported or replayed)."""
    bogus = {setting.name: "bogus" for setting in (*SETTINGS, *CLI_CHANNEL)}
    done = _python(
        "import otel_replay, otel_replay.export, otel_replay.capture.instrumentor\n"
        "from otel_replay import ReplayInstrumentor, ReplaySpanExporter, run\n"
        "print('imported')",
        **bogus,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "imported"


@pytest.mark.subprocess
def test_importing_a_stage_loads_nothing_after_it() -> None:
    code = (
        "import importlib, sys\n"
        "importlib.import_module({module!r})\n"
        "print(sorted(m for m in sys.modules if m.startswith('otel_replay.')))"
    )
    for module, absent in (
        ("otel_replay.capture.instrumentor", ("export", "replay", "store", "cli")),
        ("otel_replay.export", ("replay", "cli", "capture.instrumentor")),
    ):
        done = _python(code.format(module=module))
        assert done.returncode == 0, done.stderr
        loaded = ast.literal_eval(done.stdout)
        assert [m for m in loaded if m.startswith(tuple(f"otel_replay.{a}" for a in absent))] == []
