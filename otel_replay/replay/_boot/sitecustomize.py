"""Loaded at start-up by the process ``otel-replay replay`` runs (its directory is put first on
``PYTHONPATH``), so a plain ``python agent.py`` replays too. Then runs any ``sitecustomize``
this one shadows."""

import os
import sys
from importlib.machinery import PathFinder
from importlib.util import module_from_spec

# multiprocessing's resource tracker (started by its spawn and forkserver methods) runs none
# of the program's code, only the clean-up of its semaphores: replaying it would cost a whole
# start-up and serve nothing.
_TRACKER = "from multiprocessing.resource_tracker import main;"
_argv = getattr(sys, "orig_argv", [])
_tracker = _argv[-2:-1] == ["-c"] and _argv[-1].startswith(_TRACKER)

if os.environ.get("OTEL_REPLAY_MODE", "").strip().lower() == "replay" and not _tracker:
    from otel_replay.replay._child import bootstrap

    bootstrap()


def _run_shadowed() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(module_from_spec(spec))


_run_shadowed()
