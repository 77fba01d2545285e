"""The error of BooCode's token estimate (boocode/tools/token_estimate.py) against real BPE counts.

Counts real tool outputs of this checkout with OpenAI's o200k_base and cl100k_base tables, as
packaged by ``bpe-openai`` (its tables ship inside the package: nothing is fetched), and prints,
for each kind of output, the estimate's error on 6 KB pieces (mean, smallest, largest) and on
the whole: JSON (the filesystem server's directory_tree of this checkout, package-lock.json),
code (Python and JavaScript), logs (lines as a service writes them) and prose (docs/).

``bpe-openai`` is not one of BooCode's requirements: run this with an interpreter that has it
and Django's settings importable, e.g. a virtual environment of its own::

    python -m venv /tmp/tok && /tmp/tok/bin/pip install bpe-openai
    PYTHONPATH=. /tmp/tok/bin/python bench/token_estimate.py

This is a benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import bpe_openai

ROOT = Path(__file__).resolve().parent.parent
PIECE = 6000

# The estimator alone (no Django): loaded from its file.
_spec = importlib.util.spec_from_file_location(
    "token_estimate", ROOT / "boocode" / "tools" / "token_estimate.py"
)
assert _spec is not None and _spec.loader is not None
token_estimate = importlib.util.module_from_spec(_spec)
sys.modules["token_estimate"] = token_estimate
_spec.loader.exec_module(token_estimate)


def directory_tree(path: Path, depth: int = 0) -> list[dict[str, Any]]:
    """What the filesystem server's directory_tree gives for ``path`` (its JSON shape)."""
    entries: list[dict[str, Any]] = []
    for child in sorted(path.iterdir()):
        if child.name.startswith(".") or child.name in ("node_modules", "__pycache__"):
            continue
        entry: dict[str, Any] = {"name": child.name, "type": "directory" if child.is_dir() else "file"}
        if child.is_dir() and depth < 4:
            entry["children"] = directory_tree(child, depth + 1)
        entries.append(entry)
    return entries


def samples() -> dict[str, str]:
    log = "\n".join(
        f"2026-12-07 {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d},{i % 1000:03d} INFO worker-{i % 8} "
        f"GET /api/items/{i} 200 in {i % 97} ms user={i % 31} trace={i * 7919:x}"
        for i in range(5000)
    )
    return {
        "json": json.dumps(directory_tree(ROOT), indent=2)
        + (ROOT / "tests" / "node" / "package-lock.json").read_text()[:300_000],
        "code": "".join(p.read_text() for p in sorted(ROOT.glob("boocode/chat/*.py")))
        + "".join(p.read_text() for p in sorted(ROOT.glob("static/chat/*.js"))),
        "logs": log,
        "prose": "".join(p.read_text() for p in sorted(ROOT.glob("docs/*.md"))),
    }


def main() -> None:
    encodings = {name: bpe_openai.get_encoding(name) for name in ("o200k_base", "cl100k_base")}
    print(f"{'output':6} {'encoding':12} {'pieces':>6} {'mean':>7} {'min':>7} {'max':>7} {'all':>7}")
    for kind, text in samples().items():
        for name, encoding in encodings.items():
            errors, estimated, counted = [], 0, 0
            for start in range(0, min(len(text), 600_000), PIECE):
                piece = text[start : start + PIECE]
                tokens = len(encoding.encode(piece))
                errors.append(token_estimate.estimate(piece) / tokens - 1)
                estimated, counted = estimated + token_estimate.estimate(piece), counted + tokens
            whole = estimated / counted - 1
            print(
                f"{kind:6} {name:12} {len(errors):6} {statistics.mean(errors):+7.1%} {min(errors):+7.1%} "
                f"{max(errors):+7.1%} {whole:+7.1%}"
            )


if __name__ == "__main__":
    main()
