"""``bench/chat_load.py --against``: the runs' order and the ratio table (bench/pairs.py)."""

from __future__ import annotations

import math
from typing import Any

from bench.pairs import format_ratio_table, pair_order, ratio_table


def run(pair: int, side: str, **figures: Any) -> dict[str, Any]:
    return {"pair": pair, "side": side, "figures": figures}


def row(rows: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    return next(row for row in rows if row["metric"] == metric)


def test_pairs_alternate_which_side_goes_first() -> None:
    assert pair_order(3) == [(0, "this"), (0, "that"), (1, "that"), (1, "this"), (2, "this"), (2, "that")]


def test_ratios_are_this_over_that_per_pair_with_their_median_and_who_they_favour() -> None:
    runs = [
        run(0, "this", turns_per_s=30.0, added_p50_ms=10.0, errors=0),
        run(0, "that", turns_per_s=20.0, added_p50_ms=20.0, errors=1),
        run(1, "that", turns_per_s=20.0, added_p50_ms=10.0, errors=0),
        run(1, "this", turns_per_s=10.0, added_p50_ms=30.0, errors=0),
        run(2, "this", turns_per_s=22.0, added_p50_ms=10.0, errors=2),
        run(2, "that", turns_per_s=20.0, added_p50_ms=10.0, errors=0),
    ]
    rows = ratio_table(runs, 3)

    throughput = row(rows, "turns_per_s")
    assert throughput["ratios"] == [1.5, 0.5, 1.1]
    assert throughput["median"] == 1.1
    assert (throughput["favour_this"], throughput["favour_that"]) == (2, 1)  # higher is better

    delay = row(rows, "added_p50_ms")
    assert delay["ratios"] == [0.5, 3.0, 1.0]
    assert (delay["favour_this"], delay["favour_that"]) == (1, 1)  # lower is better; 1.0 favours neither

    errors = row(rows, "errors")
    assert (errors["this"], errors["that"]) == ([0, 0, 2], [1, 0, 0])
    assert (errors["favour_this"], errors["favour_that"]) == (1, 1)


def test_a_figure_one_side_did_not_measure_has_no_ratio() -> None:
    runs = [
        run(0, "this", rss_mb=math.nan, tool_step_p50_ms=5.0, errors=0),
        run(0, "that", rss_mb=100.0, tool_step_p50_ms=0.0, errors=0),
    ]
    rows = ratio_table(runs, 1)
    assert row(rows, "rss_mb")["ratios"] == [None]
    assert row(rows, "rss_mb")["median"] is None
    assert row(rows, "tool_step_p50_ms")["ratios"] == [None]
    assert "n/a" in format_ratio_table(rows, 1).splitlines()[row_index(rows, "rss_mb")]


def row_index(rows: list[dict[str, Any]], metric: str) -> int:
    """The line of ``metric`` in the formatted table (after its heading)."""
    return 1 + [row["metric"] for row in rows].index(metric)
