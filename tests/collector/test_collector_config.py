"""The Collector configuration and compose file that ship in the repository, checked without
a container engine: every component is defined and used, every key is one the component's
configuration struct has (``schemas/``, taken from the Collector's sources at the version the
compose file pins), ports, hosts and volumes agree between the two files, and the redaction
patterns are otel-replay's own."""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema
import pytest

from otel_replay import attributes
from otel_replay.redact import AUTH_VALUE, CREDENTIAL_KEY, CREDENTIAL_NAME, Redactor
from tests.collector._otelcol import (
    COMPOSE,
    CONFIG,
    ROOT,
    Component,
    components,
    host_port,
    load_compose,
    load_config,
    schema,
    schema_name,
    variables,
)

if sys.version_info >= (3, 11):
    from re import _constants as sre_constants
    from re import _parser as sre_parse
else:  # pragma: no cover
    import sre_constants
    import sre_parse

CONTRIB_IMAGE = "otel/opentelemetry-collector-contrib"
JAEGER_IMAGE = "jaegertracing/jaeger"
# Jaeger v2's OTLP receivers (cmd/jaeger/internal/all-in-one.yaml of jaegertracing/jaeger
# v2.20.0, 798e4b0fcf22609e381df764a01461affd813e1e): gRPC on 4317, HTTP on 4318, bound to
# JAEGER_LISTEN_HOST, which its image (cmd/jaeger/Dockerfile) sets to 0.0.0.0.
JAEGER_OTLP = {"grpc": 4317, "http": 4318}

REPLAY_KEYS = sorted(
    value
    for name, value in vars(attributes).items()
    if name.isupper() and isinstance(value, str) and value.startswith("replay.")
)


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return load_config()


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_compose()


def _services(compose: dict[str, Any], image: str) -> list[str]:
    return [
        name
        for name, service in compose["services"].items()
        if service.get("image", "").partition(":")[0] == image
    ]


def _collector(compose: dict[str, Any]) -> dict[str, Any]:
    (name,) = _services(compose, CONTRIB_IMAGE)
    service: dict[str, Any] = compose["services"][name]
    return service


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> host path of each bind mount of a compose service."""
    out = {}
    for volume in service.get("volumes", []):
        host, container = volume.split(":")[:2]
        out[container] = host
    return out


# -- components ----------------------------------------------------------------------------


def test_the_file_is_a_collector_configuration(config: dict[str, Any]) -> None:
    jsonschema.validate(config, schema("otelcol"))


def test_every_component_in_a_pipeline_is_defined_and_every_one_defined_is_used(
    config: dict[str, Any],
) -> None:
    named = {
        (kind, component_id)
        for pipeline in config["service"]["pipelines"].values()
        for kind in ("receivers", "processors", "exporters")
        for component_id in pipeline.get(kind, [])
    }
    named |= {("extensions", e) for e in config["service"].get("extensions", [])}
    defined = {(c.kind, c.id) for c in components(config)}
    assert named - defined == set(), "named in a pipeline, not defined"
    assert defined - named == set(), "defined, used by no pipeline"
    assert "traces" in config["service"]["pipelines"]


def test_memory_limiter_comes_first_and_batch_last(config: dict[str, Any]) -> None:
    processors = config["service"]["pipelines"]["traces"]["processors"]
    assert processors == ["memory_limiter", "redaction", "tail_sampling", "batch"]


@pytest.mark.parametrize(
    "component", list(components(load_config())), ids=lambda c: f"{c.kind}.{c.id}"
)
def test_each_components_keys_exist_in_its_configuration(component: Component) -> None:
    jsonschema.validate(component.settings, schema(schema_name(component)))


MISSPELT = [
    ("receivers", "otlp", ["protocols", "grpc"], "endpont"),
    ("receivers", "otlp", ["protocols"], "htpp"),
    ("processors", "memory_limiter", [], "limit_percent"),
    ("processors", "redaction", [], "blocked_key_pattern"),
    ("processors", "redaction", [], "ignore_keys"),
    ("processors", "tail_sampling", [], "decision_wiat"),
    ("processors", "tail_sampling", ["decision_cache"], "sample_cache_size"),
    ("processors", "tail_sampling", ["policies", 3, "probabilistic"], "sampling_percent"),
    ("processors", "tail_sampling", ["policies", 1], "string_atribute"),
    ("processors", "batch", [], "send_batch"),
    ("exporters", "otlp_grpc/jaeger", ["tls"], "insecure_skip"),
    ("exporters", "file/archive", [], "compresion"),
    ("exporters", "file/archive", ["rotation"], "max_backup"),
]


@pytest.mark.parametrize(("kind", "component_id", "where", "key"), MISSPELT)
def test_a_misspelt_key_fails(
    config: dict[str, Any], kind: str, component_id: str, where: list[str | int], key: str
) -> None:
    settings = copy.deepcopy(config[kind][component_id])
    target = settings
    for step in where:
        target = target[step]
    target[key] = target.popitem()[1] if target else True  # a key renamed, or one added
    component = Component(kind, component_id, settings)
    with pytest.raises(jsonschema.ValidationError, match=re.escape(repr(key))):
        jsonschema.validate(settings, schema(schema_name(component)))


def test_a_component_without_a_schema_is_refused() -> None:
    with pytest.raises(FileNotFoundError):
        schema(schema_name(Component("processors", "attributes/typo", {})))


def test_the_compose_file_pins_the_version_the_schemas_come_from(compose: dict[str, Any]) -> None:
    version = _collector(compose)["image"].partition(":")[2]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert f"v{version} " in schema("otelcol")["$comment"]
    assert f"otelcol-contrib {version}" in CONFIG.read_text()
    for service in compose["services"].values():
        image = service["image"]
        assert re.search(r":\d+\.\d+(\.\d+)?(-slim)?$", image), f"{image} is not pinned"


# -- variables ------------------------------------------------------------------------------


def test_every_variable_has_a_default_and_is_documented() -> None:
    docs = (ROOT / "docs" / "collector.md").read_text()
    header = CONFIG.read_text().split("\nreceivers:")[0]
    assert variables(), "the config reads no variable"
    for name, default in variables().items():
        assert default is not None, f"{name} has no default"
        assert f"{name} " in header, f"{name} is not in the file's header"
        assert f"`{name}`" in docs, f"{name} is not in docs/collector.md"


def test_the_share_of_other_traces_comes_from_its_variable() -> None:
    def share(config: dict[str, Any]) -> float:
        policies = config["processors"]["tail_sampling"]["policies"]
        (kept,) = [p["probabilistic"] for p in policies if p["type"] == "probabilistic"]
        return float(kept["sampling_percentage"])

    assert share(load_config()) == 10
    tuned = load_config({"OTELCOL_SAMPLE_OK_PERCENT": "2.5", "OTELCOL_DECISION_WAIT": "5s"})
    assert share(tuned) == 2.5
    assert tuned["processors"]["tail_sampling"]["decision_wait"] == "5s"
    jsonschema.validate(tuned["processors"]["tail_sampling"], schema("processor-tail_sampling"))


# -- tail sampling --------------------------------------------------------------------------


def test_errors_and_every_failure_label_are_kept(config: dict[str, Any]) -> None:
    policies = config["processors"]["tail_sampling"]["policies"]
    assert {"type": "status_code", "status_code": {"status_codes": ["ERROR"]}}.items() <= {
        k: v for p in policies if p["type"] == "status_code" for k, v in p.items()
    }.items()
    labels = sorted(k for k in REPLAY_KEYS if k.startswith("replay.failure."))
    assert labels == ["replay.failure.category", "replay.failure.severity"]
    kept_by_label = {
        p["string_attribute"]["key"]
        for p in policies
        if p["type"] == "string_attribute"
        and p["string_attribute"].get("enabled_regex_matching")
        and p["string_attribute"]["values"] == [".+"]
        and not p["string_attribute"].get("invert_match")
    }
    assert kept_by_label == set(labels)
    for value in ("contract_violation", "critical", "x"):
        assert re.search(".+", value)


# -- ports, hosts and volumes ---------------------------------------------------------------


def test_the_receivers_listen_where_the_agent_and_the_host_reach_them(
    config: dict[str, Any], compose: dict[str, Any]
) -> None:
    protocols = config["receivers"]["otlp"]["protocols"]
    ports = {}
    for name, settings in protocols.items():
        host, port = host_port(settings["endpoint"])
        assert host == "0.0.0.0", f"{name} listens on {host}: no other container reaches it"
        ports[name] = port
    collector = _collector(compose)
    published = {int(p.split(":")[-1]) for p in collector["ports"]}
    assert set(ports.values()) <= published

    (collector_name,) = _services(compose, CONTRIB_IMAGE)
    agent_env = compose["services"]["agent"]["environment"]
    assert agent_env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    host, port = host_port(agent_env["OTEL_EXPORTER_OTLP_ENDPOINT"])
    assert (host, port) == (collector_name, ports["http"])
    assert "otlp" in agent_env["OTEL_TRACES_EXPORTER"].split(",")
    assert collector_name in compose["services"]["agent"]["depends_on"]


def test_the_jaeger_exporter_reaches_jaegers_otlp_receiver(
    config: dict[str, Any], compose: dict[str, Any]
) -> None:
    (jaeger,) = _services(compose, JAEGER_IMAGE)
    assert compose["services"][jaeger]["image"] == f"{JAEGER_IMAGE}:2.20.0"
    exporter = config["exporters"]["otlp_grpc/jaeger"]
    assert host_port(exporter["endpoint"]) == (jaeger, JAEGER_OTLP["grpc"])
    assert exporter["tls"] == {"insecure": True}  # Jaeger's receiver has no TLS
    assert jaeger in _collector(compose)["depends_on"]


def test_the_config_is_the_one_the_collector_loads(compose: dict[str, Any]) -> None:
    collector = _collector(compose)
    (flag,) = [a for a in collector["command"] if a.startswith("--config=")]
    mounted = _mounts(collector)[flag.partition("=")[2]]
    assert (ROOT / mounted).resolve() == CONFIG


def test_the_archive_lands_in_a_host_directory(
    config: dict[str, Any], compose: dict[str, Any]
) -> None:
    path = PurePosixPath(config["exporters"]["file/archive"]["path"])
    host = _mounts(_collector(compose)).get(str(path.parent))
    assert host is not None, f"{path.parent} is no volume of the Collector"
    assert host.startswith("./") and not Path(host).suffix, "a directory beside the compose file"
    assert f"mkdir -p {host.removeprefix('./')}" in COMPOSE.read_text()
    assert f"/{host.removeprefix('./')}/" in (ROOT / ".gitignore").read_text()


def test_the_agent_records_the_example_against_the_stand_in(compose: dict[str, Any]) -> None:
    agent = compose["services"]["agent"]
    command = " ".join(agent["command"])
    assert "python -m examples.standin --port 8765" in command
    assert "opentelemetry-instrument python examples/support_agent.py" in command
    assert agent["environment"]["STANDIN_URL"] == "http://127.0.0.1:8765"
    assert not any("API_KEY" in name for name in agent["environment"])
    assert (ROOT / "examples" / "support_agent.py").is_file()
    assert _mounts(agent)[agent["working_dir"]] == "."


# -- redaction ------------------------------------------------------------------------------


def test_the_redaction_patterns_are_our_redactors(config: dict[str, Any]) -> None:
    redaction = config["processors"]["redaction"]
    assert redaction["blocked_key_patterns"] == [CREDENTIAL_NAME, CREDENTIAL_KEY]
    assert redaction["blocked_values"] == [AUTH_VALUE]
    assert redaction["allow_all_keys"] is True  # every attribute is kept
    assert set(redaction["ignored_keys"]) == {
        attributes.REPLAY_REQUEST_BODY,
        attributes.REPLAY_RESPONSE_BODY,
    }


_LOOK_AROUND = {sre_constants.ASSERT, sre_constants.ASSERT_NOT}
_BACKREFERENCE = {sre_constants.GROUPREF, sre_constants.GROUPREF_EXISTS}
# Python 3.11's atomic groups and possessive repeats: RE2 has neither.
_ATOMIC = {getattr(sre_constants, n, None) for n in ("ATOMIC_GROUP", "POSSESSIVE_REPEAT")} - {None}


def _operations(parsed: Any) -> set[Any]:
    """Every operation of a parsed pattern, nested ones included."""
    found = set()
    for op, argument in parsed:
        found.add(op)
        for item in argument if isinstance(argument, (list, tuple)) else [argument]:
            if isinstance(item, sre_parse.SubPattern):
                found |= _operations(item)
            elif isinstance(item, (list, tuple)):
                for sub in item:
                    if isinstance(sub, sre_parse.SubPattern):
                        found |= _operations(sub)
    return found


@pytest.mark.parametrize("pattern", [CREDENTIAL_NAME, CREDENTIAL_KEY, AUTH_VALUE])
def test_each_pattern_is_valid_in_python_and_re2(pattern: str) -> None:
    re.compile(pattern)
    operations = _operations(sre_parse.parse(pattern))
    assert not operations & _LOOK_AROUND, "RE2 has no look-around"
    assert not operations & _BACKREFERENCE, "RE2 has no backreference"
    assert not operations & _ATOMIC, "RE2 has no atomic group or possessive repeat"
    # A pattern that matches "" would mask every attribute that is not a string ("****").
    assert re.search(pattern, "") is None


def test_the_parser_walk_sees_look_around() -> None:
    assert _operations(sre_parse.parse(r"(?i)(a|(?=b)c)$")) & _LOOK_AROUND
    assert _operations(sre_parse.parse(r"(x)\1")) & _BACKREFERENCE


@pytest.mark.parametrize("key", REPLAY_KEYS)
def test_no_replay_attribute_is_taken_for_a_credential(key: str) -> None:
    for pattern in (CREDENTIAL_NAME, CREDENTIAL_KEY):
        assert re.search(pattern, key) is None, pattern


@pytest.mark.parametrize(
    "key",
    [
        "http.request.header.authorization",
        "http.request.header.x-api-key",
        "http.request.header.ocp-apim-subscription-key",
        "http.response.header.set-cookie",
        "db.password",
        "app.client_secret",
        "aws.secret_access_key",
        "user.apiKey",
        "oauth.refresh_token",
    ],
)
def test_credential_keys_are_blocked(key: str) -> None:
    assert re.search(CREDENTIAL_NAME, key) or re.search(CREDENTIAL_KEY, key)


@pytest.mark.parametrize(
    "key", ["gen_ai.usage.input_tokens", "gen_ai.request.max_tokens", "server.address", "url.full"]
)
def test_ordinary_keys_are_not(key: str) -> None:
    assert not re.search(CREDENTIAL_NAME, key) and not re.search(CREDENTIAL_KEY, key)


def test_an_auth_value_is_masked_whole() -> None:
    assert re.sub(AUTH_VALUE, "****", "Bearer sk-live-123 trailing") == "****"
    assert re.sub(AUTH_VALUE, "****", 'Digest username="a", response="b"') == "****"
    assert re.sub(AUTH_VALUE, "****", "a basic answer") == "a basic answer"


def test_the_redactor_uses_the_same_patterns() -> None:
    redactor = Redactor()
    headers = [
        (b"X-Custom-Api-Key", b"k-123456789"),
        (b"Ocp-Apim-Subscription-Key", b"s-123456789"),
        (b"X-Note", b"Bearer t-123456789"),
        (b"X-RateLimit-Remaining-Tokens", b"42"),
    ]
    assert dict(redactor.headers(headers)) == {
        "X-Custom-Api-Key": "REDACTED",
        "Ocp-Apim-Subscription-Key": "REDACTED",
        "X-Note": "REDACTED",
        "X-RateLimit-Remaining-Tokens": "42",
    }
    body = b'{"secret_access_key": "abc", "refresh-token": "def", "token": "ghi"}'
    assert redactor.body(body) == (
        b'{"secret_access_key": "REDACTED", "refresh-token": "REDACTED", "token": "ghi"}'
    )
