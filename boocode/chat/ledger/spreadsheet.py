"""CSV for spreadsheets: a header line, then the rows, and no cell a spreadsheet would run as a formula.

The admin's exports (the audit log of tool calls, usage per person and day) go through
:func:`csv_text`. A text cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return gets a leading ``'`` (:func:`safe_cell`), as OWASP's "CSV injection" advice says; numbers
and dates are written as they are.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    """``value``, with a leading ``'`` when it is text a spreadsheet would read as a formula."""
    if isinstance(value, str) and value[:1] in FORMULA_STARTS:
        return "'" + value
    return value


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """``rows`` under ``header`` as CSV text, every cell through :func:`safe_cell`."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    for row in rows:
        writer.writerow([safe_cell(value) for value in row])
    return out.getvalue()
