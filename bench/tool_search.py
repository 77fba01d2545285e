"""How well tool search finds the right tool, what it saves, and how fast it answers.

Reads the recorded catalog (``bench/fixtures/tool_catalog.json``: the real ``tools/list`` of
published servers, with their versions) and the requests (``bench/fixtures/tool_search_requests.jsonl``:
easy, paraphrased, ambiguous, first steps of longer tasks, and requests no tool serves, each with
its acceptable tools), ranks every request with BooCode's ranker (:mod:`boocode.tools.ranking`)
and prints, for the hybrid ranker and for its lexical half alone:

* recall@1, @5 and @10 per kind of served request (a hit: any acceptable tool in the top k);
* how often "no tool fits" is the answer to unserved requests, and (wrongly) to served ones;
* tokens of tool definitions per model request of a 5-step turn, every tool offered vs deferred
  (the search tool plus what the searches loaded), and their ratio;
* query latency (median and p95, index built), the index's build time from cold and the
  model's load time.

Targets (docs/tools.md): recall@5 >= 0.90 on served requests; >= 0.8 of unserved requests
answered "no tool fits" with the served ones keeping their recall; definitions per request <= 10 %
of the full set at 300+ tools; <= 50 ms per query at 1,000 tools. Usage:

    .venv/bin/python bench/tool_search.py [--catalog FILE] [--requests FILE] [--misses] [--half A|B]
        [--servers NAME,NAME,…]

``--half`` keeps every other request of each kind (A: the first, third, …; B: the others): the
ranker's thresholds were set on half A, so half B shows whether they hold on requests they were
not set on. ``--servers`` keeps only these servers of the catalog (a smaller install: the reference
servers filesystem, git, memory, fetch, time, sequential-thinking and sqlite are 45 tools); a
request none of their tools serves counts as unserved. Without the embedding model installed
(``make run`` does not install it; ``BOOCODE_TOOL_SEARCH_SEMANTIC=false`` turns it off) only the lexical
ranker is measured, and the output says so.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("BOOCODE_DATA_DIR", tempfile.mkdtemp(prefix="boocode-bench-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boocode.settings")
django.setup()

from boocode.tools import embedding, ranking  # noqa: E402
from boocode.tools.deferred import MAX_LOADED  # noqa: E402

FIXTURES = ROOT / "bench" / "fixtures"
KINDS = ("easy", "paraphrase", "ambiguous", "first_step")
STEPS = 5
PER_SEARCH = 5


def load(
    catalog_path: Path, requests_path: Path
) -> tuple[dict[str, Any], list[ranking.Candidate], list[dict[str, Any]]]:
    catalog = json.loads(catalog_path.read_text())
    candidates = candidates_of(catalog)
    requests = [json.loads(line) for line in requests_path.read_text().splitlines() if line.strip()]
    return catalog, candidates, requests


def subset(
    catalog: dict[str, Any], requests: list[dict[str, Any]], servers: list[str]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Only ``servers`` of the catalog; a request whose acceptable tools are all elsewhere is unserved."""
    unknown = [server for server in servers if server not in catalog["servers"]]
    if unknown:
        raise SystemExit(f"--servers: not in the catalog: {', '.join(unknown)}")
    kept = {"servers": {server: catalog["servers"][server] for server in servers}}
    narrowed = []
    for request in requests:
        acceptable = [pair for pair in request.get("acceptable", []) if pair[0] in servers]
        kind = request["kind"] if acceptable else "unserved"
        narrowed.append({**request, "kind": kind, "acceptable": acceptable})
    return kept, narrowed


def candidates_of(catalog: dict[str, Any]) -> list[ranking.Candidate]:
    return [
        ranking.Candidate.from_listing(
            server, tool, entry.get("description", ""), key=f"{server}\x00{tool['name']}"
        )
        for server, entry in catalog["servers"].items()
        for tool in entry["tools"]
    ]


def half(requests: list[dict[str, Any]], which: str) -> list[dict[str, Any]]:
    """Every other request of each kind: the first, third, … (``A``) or the second, fourth, … (``B``)."""
    seen: dict[str, int] = defaultdict(int)
    kept = []
    for request in requests:
        number = seen[request["kind"]]
        seen[request["kind"]] += 1
        if (number % 2 == 0) == (which == "A"):
            kept.append(request)
    return kept


def definition_tokens(tool: dict[str, Any]) -> int:
    """What a tool's definition costs a request, as the chat sends it (about 4 characters a token)."""
    function = {
        "name": tool["name"],
        "description": tool.get("description", ""),
        "parameters": tool.get("inputSchema", {}),
    }
    return len(json.dumps({"type": "function", "function": function}, ensure_ascii=False)) // 4


def evaluate(index: ranking.Index, requests: list[dict[str, Any]], show_misses: bool) -> dict[str, Any]:
    hits: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    counts: dict[str, int] = defaultdict(int)
    none_right = none_wrong = 0
    times: list[float] = []
    for request in requests:
        started = time.perf_counter()
        ranked = index.rank(request["request"], limit=10)
        times.append((time.perf_counter() - started) * 1000)
        kind = request["kind"]
        counts[kind] += 1
        if kind == "unserved":
            none_right += not ranked
            if ranked and show_misses:
                best = ranked[0]
                answered = f"{best.server}/{best.name} {best.score:.3f}"
                print(f"  [unserved, answered] {request['request']!r} -> {answered}")
            continue
        none_wrong += not ranked
        acceptable = {f"{server}\x00{tool}" for server, tool in request["acceptable"]}
        found = [hit.key for hit in ranked]
        for k in (1, 5, 10):
            hits[kind][k] += any(key in acceptable for key in found[:k])
        if show_misses and not any(key in acceptable for key in found[:5]):
            shown = ", ".join(key.replace("\x00", "/") for key in found[:3]) or "no tool fits"
            wanted = ", ".join(f"{s}/{t}" for s, t in request["acceptable"][:3])
            print(f"  [{kind} miss] {request['request']!r} -> {shown} (wanted {wanted})")
    served = sum(counts[kind] for kind in KINDS)
    return {
        "recall": {
            kind: {k: hits[kind][k] / counts[kind] for k in (1, 5, 10)} for kind in KINDS if counts[kind]
        },
        "served": {k: sum(hits[kind][k] for kind in KINDS) / max(served, 1) for k in (1, 5, 10)},
        "none_right": none_right / max(counts["unserved"], 1),
        "none_wrong": none_wrong / max(served, 1),
        "counts": dict(counts),
        "latency": (statistics.median(times), sorted(times)[int(len(times) * 0.95)]),
    }


def token_savings(
    catalog: dict[str, Any], index: ranking.Index, requests: list[dict[str, Any]]
) -> tuple[int, float]:
    """Definitions per request of a 5-step turn: (every tool, deferred on average over served requests)."""
    by_key = {
        f"{server}\x00{tool['name']}": tool
        for server, entry in catalog["servers"].items()
        for tool in entry["tools"]
    }
    everything = sum(definition_tokens(tool) for tool in by_key.values())
    search_tool = 180  # the search tool's own definition (its description names the servers)
    deferred = []
    for request in requests:
        if request["kind"] == "unserved":
            continue
        loaded: list[str] = []
        total = 0
        for _ in range(STEPS):  # each step: the request carries what is loaded, then searches again
            total += search_tool + sum(definition_tokens(by_key[key]) for key in loaded)
            found = [hit.key for hit in index.rank(request["request"], limit=PER_SEARCH)]
            loaded = list(dict.fromkeys([*found, *loaded]))[:MAX_LOADED]
        deferred.append(total / STEPS)
    return everything, statistics.mean(deferred)


def _recall_line(label: str, count: int, recall: dict[int, float]) -> str:
    return f"  {label:<11} n={count:<4} R@1 {recall[1]:.3f}  R@5 {recall[5]:.3f}  R@10 {recall[10]:.3f}"


def report(name: str, result: dict[str, Any]) -> None:
    counts = result["counts"]
    print(f"\n{name}")
    for kind, recall in result["recall"].items():
        print(_recall_line(kind, counts[kind], recall))
    served = sum(counts.get(kind, 0) for kind in KINDS)
    print(_recall_line("served", served, result["served"]) + "   (target R@5 >= 0.90)")
    unserved = counts.get("unserved", 0)
    print(f"  unserved answered 'no tool fits': {result['none_right']:.3f} of {unserved}   (target >= 0.80)")
    print(f"  served answered 'no tool fits' (wrongly): {result['none_wrong']:.3f}")
    median, p95 = result["latency"]
    print(f"  query latency: median {median:.1f} ms, p95 {p95:.1f} ms   (target <= 50 ms at 1,000 tools)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", type=Path, default=FIXTURES / "tool_catalog.json")
    parser.add_argument("--requests", type=Path, default=FIXTURES / "tool_search_requests.jsonl")
    parser.add_argument("--misses", action="store_true", help="print the requests each ranker misses")
    parser.add_argument("--half", choices=("A", "B"), help="only every other request of each kind")
    parser.add_argument("--servers", help="only these servers of the catalog (comma-separated)")
    options = parser.parse_args()
    catalog, candidates, requests = load(options.catalog, options.requests)
    if options.servers:
        catalog, requests = subset(catalog, requests, [name.strip() for name in options.servers.split(",")])
        candidates = candidates_of(catalog)
    if options.half:
        requests = half(requests, options.half)
    print(f"catalog: {len(catalog['servers'])} servers, {len(candidates)} tools; {len(requests)} requests")

    lexical = ranking.Index(candidates, None)
    best = lexical
    encoder = embedding.encoder()  # what a BooCode process would use (installed and not turned off)
    if encoder is None:
        print("the embedding model is not installed or is turned off: the lexical ranker alone")
    else:
        started = time.perf_counter()
        embedding.load()
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        best = ranking.Index(candidates, encoder)
        built = time.perf_counter() - started
        print(f"model load {loaded:.2f} s; index of {len(candidates)} tools from cold {built:.2f} s")
        report("hybrid (lexical + semantic)", evaluate(best, requests, options.misses))
    report("lexical only (BM25 over the weighted fields)", evaluate(lexical, requests, options.misses))

    everything, deferred = token_savings(catalog, best, requests)
    print(
        f"\ntool definitions per model request, {STEPS}-step turn: every tool {everything:,} tokens; "
        f"deferred {deferred:,.0f} tokens on average ({deferred / everything:.1%}; target <= 10 %)"
    )


if __name__ == "__main__":
    main()
