"""The ``otel-replay`` command line.

``main`` holds the click group and the error boundary (one-line errors, exit statuses); one
module per verb (``_runs``, ``_show``, ``_verify``, ``_gc``, ``_pin``); ``_common`` the
``--store`` option, run lookup, consoles and progress bar; ``_steps`` gathers what ``show``
says about each step; ``_tables`` draws with rich; ``_format`` and ``_messages`` are pure text
helpers.
"""
