"""The ``otel-replay`` command line."""
