"""Loaded at start-up by the process ``otel-replay replay`` runs (its directory is put first on
``PYTHONPATH``), so a plain ``python agent.py`` replays too. Then runs any ``sitecustomize``
this one shadows."""

import os
import sys
from importlib.machinery import PathFinder
from importlib.util import module_from_spec

if os.environ.get("OTEL_REPLAY_MODE", "").strip().lower() == "replay":
    from otel_replay.replay._child import bootstrap

    bootstrap()


def _run_shadowed() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(module_from_spec(spec))


_run_shadowed()
