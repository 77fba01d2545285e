"""A/B pairs for ``bench/chat_load.py --against``: the order of the runs and the table of ratios.

No Django and nothing of the project: plain functions over the figures each run returns.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Metric:
    key: str  # in a run's figures
    label: str
    higher_is_better: bool = False


# What the ratio table shows, this tree ÷ that tree. Errors are counts, shown apart.
METRICS = (
    Metric("turns_per_s", "turns/s", higher_is_better=True),
    Metric("added_p50_ms", "added first-token delay p50"),
    Metric("before_p50_ms", "  frame to the model's request p50"),
    Metric("relay_p50_ms", "  model's first bytes to text_delta p50"),
    Metric("tool_step_p50_ms", "tool step p50"),
    Metric("own_tool_step_p50_ms", "  the server's own part p50"),
    Metric("cpu_per_turn_ms", "Daphne CPU per turn"),
    Metric("rss_mb", "Daphne RSS after the run"),
    Metric("first_page_s", "Daphne start to first page"),
)


def pair_order(pairs: int) -> list[tuple[int, str]]:
    """``(pair, side)`` in run order: this, that, that, this, this, that... (ABBA), 0-based pairs.

    Alternating which side goes first spreads a drift of the machine (a neighbour's job
    starting, caches warming) over both sides instead of always charging it to the second.
    """
    order: list[tuple[int, str]] = []
    for pair in range(pairs):
        sides = ("this", "that") if pair % 2 == 0 else ("that", "this")
        order.extend((pair, side) for side in sides)
    return order


def _ratio(this: Any, that: Any) -> float | None:
    if not isinstance(this, int | float) or not isinstance(that, int | float):
        return None
    if math.isnan(this) or math.isnan(that) or that == 0:
        return None
    return this / that


def ratio_table(runs: list[dict[str, Any]], pairs: int) -> list[dict[str, Any]]:
    """One row per metric: its ratio per pair (None where a side measured nothing), their median,
    and how many pairs favour each side; then the errors, as counts per side.

    ``runs`` are ``{"pair": n, "side": "this" | "that", "figures": {...}}``.
    """
    by_pair: list[dict[str, dict[str, Any]]] = [{} for _ in range(pairs)]
    for run in runs:
        by_pair[run["pair"]][run["side"]] = run["figures"]
    complete = [pair for pair in by_pair if "this" in pair and "that" in pair]
    rows: list[dict[str, Any]] = []
    for metric in METRICS:
        ratios = [_ratio(pair["this"].get(metric.key), pair["that"].get(metric.key)) for pair in complete]
        known = [ratio for ratio in ratios if ratio is not None]
        better = [ratio > 1 if metric.higher_is_better else ratio < 1 for ratio in known if ratio != 1]
        rows.append(
            {
                "metric": metric.key,
                "label": metric.label,
                "higher_is_better": metric.higher_is_better,
                "ratios": ratios,
                "median": statistics.median(known) if known else None,
                "favour_this": sum(better),
                "favour_that": len(better) - sum(better),
            }
        )
    this_errors = [pair["this"].get("errors", 0) for pair in complete]
    that_errors = [pair["that"].get("errors", 0) for pair in complete]
    rows.append(
        {
            "metric": "errors",
            "label": "errors (this : that)",
            "this": this_errors,
            "that": that_errors,
            "favour_this": sum(a < b for a, b in zip(this_errors, that_errors, strict=True)),
            "favour_that": sum(a > b for a, b in zip(this_errors, that_errors, strict=True)),
        }
    )
    return rows


def format_ratio_table(rows: list[dict[str, Any]], pairs: int) -> str:
    """``rows`` of :func:`ratio_table` as a plain-text table."""
    width = max(len(row["label"]) for row in rows) + 2
    head = "".join(f"{f'pair {n + 1}':>9}" for n in range(pairs))
    lines = [f"{'':{width}}{head}{'median':>9}   pairs favouring this / that"]
    for row in rows:
        if row["metric"] == "errors":
            cells = [f"{a} : {b}" for a, b in zip(row["this"], row["that"], strict=True)]
            middle = f"{sum(row['this'])} : {sum(row['that'])}"
        else:
            cells = ["n/a" if ratio is None else f"{ratio:.3f}" for ratio in row["ratios"]]
            middle = "n/a" if row["median"] is None else f"{row['median']:.3f}"
        cells += [""] * (pairs - len(cells))
        direction = " (higher is better)" if row.get("higher_is_better") else ""
        lines.append(
            f"{row['label']:{width}}{''.join(f'{cell:>9}' for cell in cells)}{middle:>9}"
            f"   {row['favour_this']} / {row['favour_that']}{direction}"
        )
    return "\n".join(lines)
