"""The ``otel-replay`` command line: ``main`` holds the click group and the error boundary,
one module per verb."""
