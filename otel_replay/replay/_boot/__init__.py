"""The directory ``otel-replay replay`` puts first on the replayed process's ``PYTHONPATH``; its
``sitecustomize`` starts the replay before the application's code runs."""

BOOT_DIR = __path__[0]
