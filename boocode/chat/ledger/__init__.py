"""Accounting: what was done and what it cost.

Owns the tool calls' audit log (``audit``), usage per person and day (``daily_usage``), daily
token budgets (``budgets``; docs/teams.md), the chat's Prometheus metrics (``metrics``) and CSV
cells no spreadsheet runs (``spreadsheet``).

May import ``models`` and ``storable`` only of the chat; every other room may import it.
"""
