"""Errors raised by otel-replay.

The library raises; only the CLI turns these into one-line messages and exit codes.

    OtelReplayError
    ├── ConfigError(ValueError)        a setting from the environment or an argument is invalid
    └── CodecError(ValueError)         a provider body could not be decoded
"""

from __future__ import annotations

__all__ = ["CodecError", "ConfigError", "OtelReplayError"]


class OtelReplayError(Exception):
    """Base of every error otel-replay raises on purpose."""


class ConfigError(OtelReplayError, ValueError):
    """A setting (environment variable or argument) has a value we cannot use.

    The message names the setting and the offending value, never a secret.
    """


class CodecError(OtelReplayError, ValueError):
    """A request or response body does not have the shape its provider codec expects."""
