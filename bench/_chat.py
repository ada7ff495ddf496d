"""A synthetic Chat Completions agent for the store benchmarks (imported, not run).

Every request re-sends the whole history: a ~2 KB system prompt, six tool definitions (~2.5 KB),
user and assistant messages of 200-800 characters each, and 1-2 KB JSON responses, with the
headers the openai SDK sends and the API returns (secrets already redacted). Text is drawn word
by word from a Zipf-weighted English vocabulary; it compresses like real prose or slightly
worse (``prose_ratio`` measures it). Runs may share one system prompt and tool list, as the
runs of one agent do.
"""

from __future__ import annotations

import hashlib
import json
import random
import time

import zstandard

from otel_replay import attributes as A
from otel_replay._canonical import sha256_tag
from otel_replay.step import RunFacts, Step
from otel_replay.store._derived import REQUEST_CONTENT, RESPONSE_CONTENT
from otel_replay.store._records import step_entry

REBUILT = frozenset(
    {*REQUEST_CONTENT, *RESPONSE_CONTENT, A.REPLAY_REQUEST_BODY, A.REPLAY_RESPONSE_BODY}
)
"""The span attributes a store rebuilds from a step's bodies (its codec's reading of them)."""

MODEL = "gpt-4o-2024-08-06"
URL = "https://api.openai.com/v1/chat/completions"
RUN_ID = "r_20261121T090000_5eed0001"

_VOCABULARY = """
the of and to a in is it you that he was for on are with as I his they be at one have this from
or had by hot word but what some we can out other were all there when up use your how said an
each she which do their time if will way about many then them write would like so these her long
make thing see him two has look more day could go come did number sound no most people my over
know water than call first who may down side been now find any new work part take get place made
live where after back little only round man year came show every good me give our under name
very through just form sentence great think say help low line differ turn cause much mean before
move right boy old too same tell does set three want air well also play small end put home read
hand port large spell add even land here must big high such follow act why ask men change went
light kind off need house picture try us again animal point mother world near build self earth
father head stand own page should country found answer school grow study still learn plant cover
food sun four between state keep eye never last let thought city tree cross farm hard start
might story saw far sea draw left late run while press close night real life few north open seem
together next white children begin got walk example ease paper group always music those both
mark often letter until mile river car feet care second book carry took science eat room friend
began idea fish mountain stop once base hear horse cut sure watch color face wood main enough
plain girl usual young ready above ever red list though feel talk bird soon body dog family
direct pose leave song measure door product black short numeral class wind question happen
complete ship area half rock order fire south problem piece told knew pass since top whole king
space heard best hour better true during hundred five remember step early hold west ground
interest reach fast verb sing listen six table travel less morning ten simple several vowel
toward war lay against pattern slow center love person money serve appear road map rain rule
govern pull cold notice voice unit power town fine certain fly fall lead cry dark machine note
wait plan figure star box noun field rest correct able pound done beauty drive stood contain
front teach week final gave green oh quick develop ocean warm free minute strong special mind
behind clear tail produce fact street inch multiply nothing course stay wheel full force blue
object decide surface deep moon island foot system busy test record boat common gold possible
plane stead dry wonder laugh thousand ago ran check game shape equate miss brought heat snow
tire bring yes distant fill east paint language among account refund shipping invoice customer
warehouse delivery tracking package address billing subscription support ticket policy return
exchange warranty replacement"""
WORDS = _VOCABULARY.split()
WEIGHTS = [1 / (rank + 1) ** 0.9 for rank in range(len(WORDS))]


def text(rng: random.Random, size: int) -> str:
    """English-like text of ``size`` characters."""
    out: list[str] = []
    length = 0
    while length < size:
        words = rng.choices(WORDS, WEIGHTS, k=rng.randint(6, 18))
        if rng.random() < 0.15:
            words.insert(rng.randrange(len(words)), f"#{rng.randint(10000, 99999)}")
        sentence = " ".join(words).capitalize() + rng.choice(".....?!")
        out.append(sentence)
        length += len(sentence) + 1
    return " ".join(out)[:size]


def tools(rng: random.Random) -> list[dict]:
    """Six tool definitions of a support agent (~2.5 KB as JSON)."""
    names = ["lookup_order", "track_package", "issue_refund", "search_kb", "update_address"]
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": text(rng, 180),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "order_id": {"type": "string", "description": text(rng, 70)},
                        "reason": {"type": "string", "description": text(rng, 70)},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                    },
                    "required": ["order_id"],
                    "additionalProperties": False,
                },
                "strict": True,
            },
        }
        for name in [*names, "escalate_to_human"]
    ]


def _request_headers(size: int) -> list[tuple[str, str]]:
    return [
        ("host", "api.openai.com"),
        ("accept-encoding", "gzip, deflate"),
        ("connection", "keep-alive"),
        ("accept", "application/json"),
        ("content-type", "application/json"),
        ("user-agent", "OpenAI/Python 2.54.0"),
        ("x-stainless-lang", "python"),
        ("x-stainless-package-version", "2.54.0"),
        ("x-stainless-os", "Linux"),
        ("x-stainless-arch", "x64"),
        ("x-stainless-runtime", "CPython"),
        ("x-stainless-runtime-version", "3.11.7"),
        ("authorization", "REDACTED"),
        ("x-stainless-async", "false"),
        ("x-stainless-retry-count", "0"),
        ("x-stainless-read-timeout", "600"),
        ("content-length", str(size)),
    ]


def _response_headers(rng: random.Random, size: int, when: int) -> list[tuple[str, str]]:
    stamp = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(when))
    return [
        ("date", stamp),
        ("content-type", "application/json"),
        ("content-length", str(size)),
        ("connection", "keep-alive"),
        ("access-control-expose-headers", "X-Request-ID"),
        ("openai-organization", "user-REDACTED"),
        ("openai-processing-ms", str(rng.randint(400, 4000))),
        ("openai-project", "proj_REDACTED"),
        ("openai-version", "2020-10-01"),
        ("x-envoy-upstream-service-time", str(rng.randint(400, 4000))),
        ("x-ratelimit-limit-requests", "10000"),
        ("x-ratelimit-limit-tokens", "30000000"),
        ("x-ratelimit-remaining-requests", str(9999 - rng.randint(0, 20))),
        ("x-ratelimit-remaining-tokens", str(29990000 - rng.randint(0, 90000))),
        ("x-ratelimit-reset-requests", "6ms"),
        ("x-ratelimit-reset-tokens", f"{rng.randint(0, 30)}ms"),
        ("x-request-id", "req_" + rng.randbytes(16).hex()),
        ("strict-transport-security", "max-age=31536000; includeSubDomains; preload"),
        ("cf-cache-status", "DYNAMIC"),
        ("set-cookie", "REDACTED"),
        ("x-content-type-options", "nosniff"),
        ("server", "cloudflare"),
        ("cf-ray", rng.randbytes(8).hex() + "-FRA"),
        ("alt-svc", 'h3=":443"; ma=86400'),
    ]


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _semconv(messages: list[dict]) -> list[dict]:
    return [
        {"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]} for m in messages
    ]


def shared_prompt(seed: int) -> tuple[str, list[dict]]:
    """A system prompt (2,000 characters) and tool list, for runs of one agent to share."""
    rng = random.Random(seed)
    drawn = tools(rng)
    return text(rng, 2000), drawn


def conversation(
    turns: int,
    seed: int,
    run_id: str = RUN_ID,
    prompt: tuple[str, list[dict]] | None = None,
) -> tuple[list[Step], list[dict]]:
    """The run: one step and one span per request, plus the run's ``invoke_agent`` span.

    ``prompt`` (a :func:`shared_prompt`) replaces the run's own system prompt and tools.
    """
    rng = random.Random(seed)
    # Drawn even when shared, so the rest of the run is the same either way.
    own = (tools(rng), text(rng, 2000))
    tool_list, system = own if prompt is None else (prompt[1], prompt[0])
    history: list[dict] = [{"role": "system", "content": system}]
    steps: list[Step] = []
    spans: list[dict] = []
    clock = 1_763_700_000 * 10**9
    trace = rng.getrandbits(128)
    root = rng.getrandbits(64)
    commit = rng.randbytes(20).hex()
    facts = RunFacts(run_id, "record", seed, commit, False, clock)
    common = {"replay.run.id": run_id, "replay.mode": "record", "replay.seed": seed}
    common["vcs.ref.head.revision"] = commit
    for index in range(turns):
        history.append({"role": "user", "content": text(rng, rng.randint(200, 800))})
        body = {"messages": history, "model": MODEL, "tools": tool_list, "temperature": 0.2}
        request = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        answer = text(rng, rng.randint(200, 800))
        usage = (len(request) // 4, len(answer) // 4)
        clock += rng.randint(2, 30) * 10**9
        reply = {
            "id": "chatcmpl-" + rng.randbytes(15).hex()[:29],
            "object": "chat.completion",
            "created": clock // 10**9,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": answer,
                        "refusal": None,
                        "annotations": [],
                    },
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": sum(usage),
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": 0,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            },
            "service_tier": "default",
            "system_fingerprint": "fp_" + hashlib.md5(str(index // 10).encode()).hexdigest()[:10],
        }
        response = json.dumps(reply, indent=2, ensure_ascii=False).encode()
        took = rng.randint(800, 6000) * 10**6
        span_id = rng.getrandbits(64)
        steps.append(
            Step(
                run_id=run_id,
                index=index,
                trace_id=trace,
                span_id=span_id,
                kind="llm",
                method="POST",
                url=URL,
                request_headers=_request_headers(len(request)),
                request_body=request,
                request_hash=sha256_tag(request),
                status_code=200,
                response_headers=_response_headers(rng, len(response), clock // 10**9),
                response_body=response,
                response_hash=sha256_tag(response),
                chunks=[(len(response), took)],
                complete=True,
                start_ns=clock,
                end_ns=clock + took,
                provider="openai",
                model=MODEL,
                tokens_in=usage[0],
                tokens_out=usage[1],
                run=facts,
            )
        )
        attributes = {
            **common,
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": MODEL,
            "gen_ai.request.temperature": 0.2,
            "gen_ai.response.model": MODEL,
            "gen_ai.response.id": reply["id"],
            "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.usage.input_tokens": usage[0],
            "gen_ai.usage.output_tokens": usage[1],
            "server.address": "api.openai.com",
            "server.port": 443,
            "replay.step.index": index,
            "replay.step.kind": "llm",
            "replay.request.hash": sha256_tag(request),
            "replay.response.hash": sha256_tag(response),
            "replay.request.size": len(request),
            "replay.response.size": len(response),
            "replay.response.complete": True,
            "replay.prompt.hash": sha256_tag(_canonical(history).encode()),
            "replay.tool.schema.version": sha256_tag(_canonical(tool_list).encode()),
            "gen_ai.input.messages": _canonical(_semconv(history)),
            "gen_ai.output.messages": _canonical(
                [
                    {
                        **_semconv([{"role": "assistant", "content": answer}])[0],
                        "finish_reason": "stop",
                    }
                ]
            ),
            "gen_ai.tool.definitions": _canonical(tool_list),
        }
        if len(request) <= 32768:
            attributes["replay.request.body"] = request.decode()
        attributes["replay.response.body"] = response.decode()
        spans.append(
            {
                "name": f"chat {MODEL}",
                "kind": "CLIENT",
                "trace_id": f"{trace:032x}",
                "span_id": f"{span_id:016x}",
                "parent_span_id": f"{root:016x}",
                "start_ns": clock,
                "end_ns": clock + took,
                "status": {"code": "UNSET"},
                "attributes": attributes,
                "events": [],
                "resource": {"service.name": "support-agent", "telemetry.sdk.language": "python"},
                "scope": {"name": "otel_replay", "version": "0.1.0"},
            }
        )
        history = [*history, {"role": "assistant", "content": answer}]
    spans.append(
        {
            "name": "invoke_agent support-agent",
            "kind": "INTERNAL",
            "trace_id": f"{trace:032x}",
            "span_id": f"{root:016x}",
            "parent_span_id": None,
            "start_ns": steps[0].start_ns,
            "end_ns": clock + 10**9,
            "status": {"code": "UNSET"},
            "attributes": {**common, "gen_ai.operation.name": "invoke_agent"},
            "events": [],
            "resource": {"service.name": "support-agent", "telemetry.sdk.language": "python"},
            "scope": {"name": "otel_replay", "version": "0.1.0"},
        }
    )
    return steps, spans


def raw_bytes(steps: list[Step]) -> int:
    """Request and response bodies, as sent and received."""
    return sum(len(step.request_body) + len(step.response_body) for step in steps)


def prose_ratio() -> float:
    """How well the generated text compresses (zstd level 19), for comparison with prose."""
    sample = text(random.Random(1), 30_000).encode()
    return len(sample) / len(zstandard.ZstdCompressor(level=19).compress(sample))


def stream_floor(runs: list[tuple[list[Step], list[dict]]]) -> dict[str, int]:
    """The runs' content compressed as one zstd stream (level 19, a 128 MiB window with
    long-distance matching: every repeat in reach, no random access, no addressing): the
    bodies alone; with the other facts a replay needs (what a record states of each step:
    headers, timing, chunks, digests, tokens); with the spans less what a store rebuilds from
    the bodies (:data:`REBUILT`: what our store must keep of them); and with the spans as
    given. This is what zstd itself reaches on the content; a store built on zstd that keeps
    the same facts, reads any body back alone and names content by sha256 stays above it."""
    params = zstandard.ZstdCompressionParameters.from_level(19, window_log=27, enable_ldm=True)
    compressor = zstandard.ZstdCompressor(compression_params=params)
    bodies = b"".join(s.request_body + s.response_body for steps, _ in runs for s in steps)
    facts = b"\n".join(json.dumps(step_entry(s)).encode() for steps, _ in runs for s in steps)
    spans = [span for _, run in runs for span in run]
    kept = b"\n".join(
        json.dumps(
            {
                **span,
                "attributes": {
                    k: v for k, v in span.get("attributes", {}).items() if k not in REBUILT
                },
            }
        ).encode()
        for span in spans
    )
    given = b"\n".join(json.dumps(span).encode() for span in spans)
    return {
        "bodies": len(compressor.compress(bodies)),
        "bodies+facts": len(compressor.compress(bodies + facts)),
        "bodies+facts+spans kept": len(compressor.compress(bodies + facts + kept)),
        "bodies+facts+spans": len(compressor.compress(bodies + facts + given)),
    }
