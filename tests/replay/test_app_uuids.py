"""The application's own ``uuid.uuid4()`` and ``uuid1()`` are value steps with no code change;
those an installed package draws (an SDK's idempotency key, a framework's run id) are not."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from uuid import uuid4 as bound_uuid4

import openai
import pytest

import otel_replay
from examples.standin import StandIn
from otel_replay.envelope import _uuids
from otel_replay.envelope import _uuids as _app_code
from otel_replay.replay.sources import load_run
from tests.export._support import INSTRUMENT, ROOT, Pipeline, subprocess_env

AGENT = Path(__file__).with_name("_uuid_agent.py")
CLI = Path(sys.executable).parent / "otel-replay"


def _steps(store: Path, run_id: str) -> list[str]:
    """The run's steps by endpoint."""
    return [step.endpoint for step in load_run(run_id, store=str(store)).steps]


def _replay(store: Path, run_id: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "STANDIN_"))}
    return subprocess.run(
        [str(CLI), "replay", run_id, "--store", str(store), "--", sys.executable, str(AGENT)],
        env=clean | {"STANDIN_URL": "http://127.0.0.1:9", "PYTHONPATH": str(ROOT)} | env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.subprocess
def test_an_agent_with_a_fresh_uuid_in_its_prompt_replays_identically(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with StandIn(event_delay=0.001) as standin:
        recorded = subprocess.run(
            [str(INSTRUMENT), sys.executable, str(AGENT)],
            env=subprocess_env(store, OTEL_REPLAY_RUN_ID="r_ids", STANDIN_URL=standin.base_url),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert recorded.returncode == 0, recorded.stderr
    # The agent's three draws; the openai SDK's idempotency key is not a step.
    assert _steps(store, "r_ids") == [
        "value:uuid.uuid4",
        "value:uuid.uuid4",
        "value:uuid.uuid1",
        "openai.chat_completions",
    ]

    replayed = _replay(store, "r_ids")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert replayed.stdout.startswith(recorded.stdout)  # the same ids in the same prompt
    assert f"replay of run r_ids (store {store}): identical" in replayed.stdout


def test_an_application_draw_the_recording_lacks_diverges(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with Pipeline(store) as pipeline:
        first = uuid.uuid4()
        run_id = pipeline.run.run_id
    with otel_replay.replaying(run_id, store=str(store)) as result:
        assert uuid.uuid4() == first
        uuid.uuid4()  # one more than recorded: the recorded one again, as a repeat
    assert not result.identical
    assert result.first_divergence is not None
    assert result.first_divergence.describe() == "step 0 differs from the recording"
    assert result.steps[1].repeat


def test_an_installed_packages_draws_are_not_steps(tmp_path: Path, standin: StandIn) -> None:
    installed = tmp_path / "lib" / "python3" / "site-packages"
    installed.mkdir(parents=True)
    (installed / "some_framework.py").write_text(
        textwrap.dedent(
            """
            import uuid
            from dataclasses import dataclass, field

            def run_id():
                return uuid.uuid4()

            @dataclass
            class Event:
                id: uuid.UUID = field(default_factory=uuid.uuid4)
            """
        )
    )
    sys.path.insert(0, str(installed))
    try:
        import some_framework  # type: ignore[import-not-found]

        with Pipeline(tmp_path / "store") as pipeline:
            some_framework.run_id()
            some_framework.Event()

            @dataclass
            class Ticket:  # the application's own: its __init__ runs as <string>
                id: uuid.UUID = field(default_factory=uuid.uuid4)

            ticket = Ticket()
            client = openai.OpenAI(base_url=standin.openai_base_url, api_key="sk-x")
            with client:  # the SDK draws an idempotency key for each request
                client.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": f"{ticket.id}"}]
                )
            run_id = pipeline.run.run_id
    finally:
        sys.path.remove(str(installed))
        sys.modules.pop("some_framework", None)
    assert _steps(tmp_path / "store", run_id) == ["value:uuid.uuid4", "openai.chat_completions"]


def test_a_name_bound_before_recording_began_is_rebound_while_recording(tmp_path: Path) -> None:
    with Pipeline(tmp_path / "store") as pipeline:
        assert globals()["bound_uuid4"] is not _uuids.REAL_UUID4
        drawn = bound_uuid4()
        run_id = pipeline.run.run_id
    assert globals()["bound_uuid4"] is _uuids.REAL_UUID4 and uuid.uuid4 is _uuids.REAL_UUID4
    with otel_replay.replaying(run_id, store=str(tmp_path / "store")) as result:
        assert bound_uuid4() == drawn
    assert result.identical, result.first_divergence


def test_a_module_imported_between_two_holds_is_found_by_the_second(tmp_path: Path) -> None:
    with Pipeline(tmp_path / "first"):
        pass
    (tmp_path / "late_agent.py").write_text("from uuid import uuid4\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import late_agent  # type: ignore[import-not-found]

        assert late_agent.uuid4 is _uuids.REAL_UUID4
        with Pipeline(tmp_path / "second"):
            assert late_agent.uuid4 is _uuids.uuid4
        assert late_agent.uuid4 is _uuids.REAL_UUID4
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("late_agent", None)


@pytest.mark.parametrize(
    ("filename", "module_globals", "expected"),
    [
        ("/home/me/agent/main.py", {}, True),
        ("/home/me/.venv/lib/python3.12/site-packages/langchain_core/runnables/base.py", {}, False),
        ("/usr/lib/python3/dist-packages/openai/_base_client.py", {}, False),
        (_app_code.__file__, {}, False),  # otel-replay's own
        (os.__file__, {}, False),  # the standard library
        ("<frozen runpy>", {}, False),
        ("<string>", {"__name__": "__main__"}, True),  # python -c, exec in __main__
        ("<stdin>", {"__name__": "__main__"}, True),
        ("<string>", {"__name__": "lib", "__file__": "/x/site-packages/lib/gen.py"}, False),
        ("<string>", {"__name__": "agent", "__file__": "/home/me/agent/models.py"}, True),
    ],
)
def test_which_code_is_the_applications(
    filename: str, module_globals: dict[str, str], expected: bool
) -> None:
    code = compile("import sys\nframe = sys._getframe(0)", filename, "exec")
    namespace = dict(module_globals)
    exec(code, namespace)
    assert _app_code.application_frame(namespace["frame"]) is expected


def test_code_reached_through_a_link_into_site_packages_is_a_package(tmp_path: Path) -> None:
    installed = tmp_path / "site-packages"
    installed.mkdir()
    (installed / "lib.py").write_text("")
    (tmp_path / "vendor").symlink_to(installed)
    assert _app_code.application_file(str(tmp_path / "vendor" / "lib.py")) is False
    assert _app_code.application_file(str(tmp_path / "app.py")) is True


def test_a_package_pip_installed_into_a_folder_of_its_own_is_a_package(tmp_path: Path) -> None:
    """``pip install --target DIR`` (then PYTHONPATH=DIR): no site-packages in the path, but
    the distribution's RECORD beside the package names it."""
    target = tmp_path / "vendor"
    (target / "sdk").mkdir(parents=True)
    (target / "sdk" / "client.py").write_text("")
    (target / "single.py").write_text("")
    (target / "sdk-1.0.dist-info").mkdir()
    (target / "sdk-1.0.dist-info" / "RECORD").write_text(
        "sdk/__init__.py,sha256=x,0\nsdk/client.py,sha256=y,0\nsingle.py,,\n"
    )
    (target / "agent").mkdir()
    (target / "agent" / "main.py").write_text("")
    assert _app_code.application_file(str(target / "sdk" / "client.py")) is False
    assert _app_code.application_file(str(target / "single.py")) is False
    assert _app_code.application_file(str(target / "agent" / "main.py")) is True  # not listed
