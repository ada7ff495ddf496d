"""The ``otel-replay`` command line.

``main`` holds the click group, the error boundary (one-line errors, exit statuses) and
``VERBS``, which names each verb's module, imported only when that verb runs; one module per
verb (``_runs``, ``_show``, ``_verify``, ``_gc``, ``_pin``...); ``_common`` the ``--store``
option, run lookup, consoles and progress bar; ``_steps`` gathers what ``show`` says about each
step; ``_tables`` draws with rich; ``_format`` and ``_messages`` are pure text helpers.
"""
