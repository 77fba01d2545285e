"""``manage.py audit_prune``: delete audit rows older than ``BOOCODE_AUDIT_DAYS`` days now."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from boocode.chat.ledger.audit import prune


class Command(BaseCommand):
    help = "Delete the audit log's tool call rows older than BOOCODE_AUDIT_DAYS days (0 keeps them all)."

    def handle(self, *args: Any, **options: Any) -> None:
        deleted = prune()
        self.stdout.write(f"{deleted} audit row(s) deleted.")
