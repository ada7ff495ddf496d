"""Running the CLI in-process and checking its one-line errors."""

from __future__ import annotations

import inspect

from click.testing import CliRunner, Result

from otel_replay.cli.main import cli


def _runner() -> CliRunner:
    # click < 8.2 mixes stderr into stdout unless told not to; 8.2 removed the parameter
    # and always keeps them apart (``output`` has both, interleaved).
    if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    return CliRunner()


def run_cli(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run ``otel-replay ARGS`` in-process; exceptions are not caught."""
    return _runner().invoke(cli, list(args), env=env, catch_exceptions=False)


def assert_bad_input(result: Result, *names: str) -> str:
    """Exit 2, nothing on stdout, one ``Error:`` line on stderr naming each of ``names``;
    returns that line."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    (line,) = lines
    assert line.startswith("Error: ")
    for name in names:
        assert name in line, (name, line)
    return line
