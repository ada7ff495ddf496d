"""Store size: one 30-turn chat run as raw bytes, as a vcrpy JSON cassette, and in our store.

The run: an OpenAI Chat Completions agent whose every request re-sends the whole history —
a ~2 KB system prompt, six tool definitions (~2.5 KB), user and assistant messages of 200-800
characters each, and 1-2 KB JSON responses, with the headers the openai SDK sends and the API
returns (secrets already redacted). Text is drawn word by word from a Zipf-weighted English
vocabulary; it compresses like real prose or slightly worse (zstd-19 ratio printed below).

Measured in one process, on the same interactions:

* raw — request + response bodies, as sent and received;
* cassette — the same interactions written by vcrpy's own JSON serializer and persister;
* store — every file under the store directory (packs, ``FORMAT``, ``index.sqlite``) after
  the writer closes, recorded the way the exporter records: ``put`` + ``flush`` per step.
  Once with the fixtures only (what the cassette holds), once with the spans too (each step's
  span carries the inline bodies and ``gen_ai.input.messages``, as the capture produces them).

Also the cost of a flush (one step, durable on return) against the per-file price of writing
each blob safely on its own (temporary file, fsync, rename, directory fsync).

    python bench/store_ratio.py [--turns 30] [--seed 7]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import zstandard
from vcr.persisters.filesystem import FilesystemPersister
from vcr.request import Request
from vcr.serializers import jsonserializer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from otel_replay._canonical import sha256_tag
from otel_replay.step import Step
from otel_replay.store import Store
from otel_replay.store._pack import (
    FOOTER,
    KIND_RAW,
    KIND_RECIPE,
    KIND_RECORD,
    KIND_SEGMENT,
    decompress_frame,
    parse_footer,
    parse_trailer,
)

TARGET_RAW = 30.0
TARGET_CASSETTE = 25.0
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


def _tools(rng: random.Random) -> list[dict]:
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


def conversation(turns: int, seed: int, run_id: str = RUN_ID) -> tuple[list[Step], list[dict]]:
    """The run: one fixture and one span per request, plus the run's ``invoke_agent`` span."""
    rng = random.Random(seed)
    tools = _tools(rng)
    history: list[dict] = [{"role": "system", "content": text(rng, 2000)}]
    fixtures: list[Step] = []
    spans: list[dict] = []
    clock = 1_763_700_000 * 10**9
    trace = rng.getrandbits(128)
    root = rng.getrandbits(64)
    common = {"replay.run.id": run_id, "replay.mode": "record", "replay.seed": seed}
    common["vcs.ref.head.revision"] = rng.randbytes(20).hex()
    for index in range(turns):
        history.append({"role": "user", "content": text(rng, rng.randint(200, 800))})
        body = {"messages": history, "model": MODEL, "tools": tools, "temperature": 0.2}
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
        fixtures.append(
            Step(
                run_id=run_id,
                step_index=index,
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
            "replay.tool.schema.version": sha256_tag(_canonical(tools).encode()),
            "gen_ai.input.messages": _canonical(_semconv(history)),
            "gen_ai.output.messages": _canonical(
                [
                    {
                        **_semconv([{"role": "assistant", "content": answer}])[0],
                        "finish_reason": "stop",
                    }
                ]
            ),
            "gen_ai.tool.definitions": _canonical(tools),
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
            "start_ns": fixtures[0].start_ns,
            "end_ns": clock + 10**9,
            "status": {"code": "UNSET"},
            "attributes": {**common, "gen_ai.operation.name": "invoke_agent"},
            "events": [],
            "resource": {"service.name": "support-agent", "telemetry.sdk.language": "python"},
            "scope": {"name": "otel_replay", "version": "0.1.0"},
        }
    )
    return fixtures, spans


def cassette_size(fixtures: list[Step], folder: Path) -> int:
    """Bytes of the same interactions as a vcrpy JSON cassette written by vcrpy itself."""
    requests, responses = [], []
    for fx in fixtures:
        headers = dict(fx.request_headers)
        requests.append(Request(fx.method, fx.url, fx.request_body, headers))
        response_headers: dict[str, list[str]] = {}
        for name, value in fx.response_headers:
            response_headers.setdefault(name, []).append(value)
        responses.append(
            {
                "status": {"code": fx.status_code, "message": "OK"},
                "headers": response_headers,
                "body": {"string": fx.response_body},
            }
        )
    path = folder / "cassette.json"
    FilesystemPersister.save_cassette(
        path, {"requests": requests, "responses": responses}, serializer=jsonserializer
    )
    return path.stat().st_size


def _du(folder: Path) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for dirpath, _, files in os.walk(folder):
        for name in files:
            rel = (Path(dirpath) / name).relative_to(folder).as_posix()
            sizes[rel] = (Path(dirpath) / name).stat().st_size
    return sizes


Run = tuple[list[Step], list[dict] | None]
"""A run's fixtures, and its spans (None: fixtures only)."""


def store_size(
    runs: list[Run], folder: Path
) -> tuple[list[dict[str, int]], list[float], list[int]]:
    """Files of the store after recording each run step by step (the first run alone, then
    with the next, ...); each flush's seconds and number of fsync calls made from Python
    (SQLite's own commit fsync comes on top)."""
    flushes, syncs, after = [], [], []
    real_fsync = os.fsync
    counted = [0]

    def counting_fsync(fd: int) -> None:
        counted[0] += 1
        real_fsync(fd)

    for fixtures, spans in runs:
        with Store.open(folder) as store:
            os.fsync = counting_fsync
            try:
                for position, fx in enumerate(fixtures):
                    store.put([fx], [spans[position]] if spans else [])
                    before = counted[0]
                    started = time.perf_counter()
                    store.flush()
                    flushes.append(time.perf_counter() - started)
                    syncs.append(counted[0] - before)
            finally:
                os.fsync = real_fsync
            if spans:
                store.put(spans=spans[len(fixtures) :])
        after.append(_du(folder))
    with Store.open(folder) as store:  # the runs read back byte-exact
        for fixtures, spans in runs:
            run_id = fixtures[0].run_id
            for step in store.steps(run_id):
                assert store.request_body(step) == fixtures[step.index].request_body
                assert store.response_body(step) == fixtures[step.index].response_body
            if spans:
                assert store.spans(run_id) == json.loads(json.dumps(spans))
        assert store.verify() == []
    return after, flushes, syncs


_KINDS = {KIND_SEGMENT: "segments", KIND_RAW: "whole bodies", KIND_RECIPE: "recipes"}


def where_bytes_go(folder: Path) -> list[str]:
    """Lines saying what the store's files hold: the packs' objects (their size before
    compression, and what each kind adds to the compressed frames), and the index's pages."""
    raw: dict[str, int] = {}
    objects: list[tuple[int, bytes]] = []
    frames = tails = 0
    for pack in sorted(folder.rglob("*.pack")):
        data = pack.read_bytes()
        size, crc = parse_footer(data[-FOOTER.size :])
        index = parse_trailer(data[-FOOTER.size - size : -FOOTER.size], crc, len(data))
        tails += size + FOOTER.size
        frames += len(data) - size - FOOTER.size
        for oid in range(index.first, index.last + 1):
            at = index.locate(oid)
            frame = decompress_frame(data[at.frame_start : at.frame_end], index.frames[at.frame][2])
            objects.append((at.kind, frame[at.offset : at.offset + at.length]))
    compressor = zstandard.ZstdCompressor(level=19)

    def packed(kinds: set[int]) -> int:
        return len(compressor.compress(b"".join(o for k, o in objects if k in kinds)))

    every = {KIND_SEGMENT, KIND_RAW, KIND_RECIPE, KIND_RECORD}
    whole = packed(every)
    for kind, name in [*_KINDS.items(), (KIND_RECORD, "records")]:
        items = [o for k, o in objects if k == kind]
        raw[name] = sum(len(o) for o in items)
        raw[name + " added"] = whole - packed(every - {kind})
    parts = ", ".join(
        f"{name} {raw[name]:,} -> +{raw[name + ' added']:,}"
        for name in [*_KINDS.values(), "records"]
    )
    lines = [
        f"packs: frames {frames:,} B + pack indexes {tails:,} B; objects before compression, "
        f"and what each kind adds to zstd-19 of all: {parts}"
    ]
    index = folder / "index.sqlite"
    try:
        with sqlite3.connect(index) as conn:
            pages = conn.execute(
                "SELECT name, count(*) FROM dbstat GROUP BY name ORDER BY count(*) DESC"
            ).fetchall()
        lines.append(
            "index: " + ", ".join(f"{name} {count} pages" for name, count in pages) + " (512 B)"
        )
    except sqlite3.Error:  # an SQLite built without dbstat
        pass
    return lines


def per_file_write(folder: Path, size: int = 2048, count: int = 200) -> float:
    """Seconds to write one blob safely on its own: temp file, fsync, rename, dir fsync."""
    folder.mkdir()
    data = os.urandom(size)
    started = time.perf_counter()
    for n in range(count):
        tmp = folder / f".tmp{n}"
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, folder / f"blob{n}")
        fd = os.open(folder, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    return (time.perf_counter() - started) / count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    fixtures, spans = conversation(args.turns, args.seed)
    raw = sum(len(fx.request_body) + len(fx.response_body) for fx in fixtures)
    span_raw = len(json.dumps(spans).encode())
    sample = text(random.Random(1), 30_000).encode()
    prose = len(sample) / len(zstandard.ZstdCompressor(level=19).compress(sample))
    other = conversation(args.turns, args.seed + 1, run_id=RUN_ID + "-2")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cassette = cassette_size(fixtures, folder)
        (bare,), flushes, syncs = store_size([(fixtures, None)], folder / "bare")
        (full,), _, _ = store_size([(fixtures, spans)], folder / "full")
        bare_where, full_where = where_bytes_go(folder / "bare"), where_bytes_go(folder / "full")
        (_, bare_two), _, _ = store_size([(fixtures, None), (other[0], None)], folder / "bare2")
        (_, full_two), _, _ = store_size([(fixtures, spans), other], folder / "full2")
        safe_write = per_file_write(folder / "fsync")
    print(
        f"{args.turns}-turn run, each request re-sending the history (text zstd-19: {prose:.2f}x)"
    )
    print(f"  raw request+response bodies   {raw:>10,} B")
    print(f"  vcrpy JSON cassette           {cassette:>10,} B")
    print(f"  spans as handed to the store  {span_raw:>10,} B  (JSON)")
    other_raw = sum(len(fx.request_body) + len(fx.response_body) for fx in other[0])
    for label, files, two, where in (
        ("store, fixtures", bare, bare_two, bare_where),
        ("store, fixtures + spans", full, full_two, full_where),
    ):
        total = sum(files.values())
        packs = sum(size for rel, size in files.items() if rel.startswith("packs/"))
        index = sum(size for rel, size in files.items() if rel.startswith("index.sqlite"))
        print(
            f"  {label:<28}  {total:>10,} B  (packs {packs:,}, index {index:,}, "
            f"other {total - packs - index:,})"
        )
        print(
            f"    raw / store       {raw / total:6.1f}x   target >= {TARGET_RAW:.0f}x"
            f"   (packs alone {raw / packs:.1f}x)"
        )
        print(
            f"    cassette / store  {cassette / total:6.1f}x   target >= {TARGET_CASSETTE:.0f}x"
            f"   (packs alone {cassette / packs:.1f}x)"
        )
        for line in where:
            print(f"    {line}")
        added = sum(two.values()) - total
        print(
            f"    a second such run in the same store adds {added:,} B: its raw / that "
            f"{other_raw / added:.1f}x (the index's first pages are paid once per store)"
        )
    print(
        f"  flush of one step (durable)   median {statistics.median(flushes) * 1e3:.2f} ms, "
        f"p90 {sorted(flushes)[int(len(flushes) * 0.9)] * 1e3:.2f} ms; "
        f"fsyncs: {statistics.median(syncs):.0f} (pack + directory) + the SQLite commit"
    )
    print(
        f"  one blob written safely alone {safe_write * 1e3:.2f} ms "
        "(a step adds ~4 objects: 2 messages, a recipe, a response; plus its record)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
