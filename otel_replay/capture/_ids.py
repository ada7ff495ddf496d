"""OpenTelemetry's span and trace ids, drawn apart from the application's ``random``.

The SDK's default id generator draws from the ``random`` module's shared generator. A run
seeds that generator (``otel_replay.run(seed=...)``, and every replay with the recorded
seed) so the application's randomness repeats; the SDK's ids would then repeat too (the
spans after a seeded run got the same trace and span ids in every process that ran it, a
recording and its replay alike, and backends merged them), and each span made would move the
application's sequence on. :func:`separate` gives the SDK a generator of its own, seeded from
the operating system and again in every forked child.
"""

from __future__ import annotations

import os
import random
import threading

__all__ = ["separate"]

_own = random.Random()
_lock = threading.Lock()
_done = False


def separate() -> None:
    """Have the SDK's ``RandomIdGenerator`` draw from a generator of its own (once)."""
    global _done  # noqa: PLW0603 - once per process
    with _lock:
        if _done:
            return
        from opentelemetry.sdk.trace import id_generator  # noqa: PLC0415 - the SDK's

        # It calls ``random.getrandbits``: the name it reads is the module's global.
        if getattr(id_generator, "random", None) is random:
            setattr(id_generator, "random", _own)  # noqa: B010 - not exported, but read
        _done = True


os.register_at_fork(after_in_child=_own.seed)
