"""``manage.py ensure_admin``: on a fresh install, create the first account.

If no user exists, create the superuser ``admin`` with BOOCODE_ADMIN_PASSWORD, or with a
generated password printed once (it is stored only as a hash), framed with what to do next
(:mod:`boocode.security.first_admin`). Otherwise do nothing.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from boocode.security.first_admin import create_first_admin, first_start_notice


class Command(BaseCommand):
    help = "Create the superuser 'admin' if no user exists (BOOCODE_ADMIN_PASSWORD or a generated password)."

    def handle(self, *args: Any, **options: Any) -> None:
        """Create the account and print the notice, or say briefly that users exist."""
        admin = create_first_admin(settings.ADMIN_PASSWORD)
        if admin is None:
            if options["verbosity"] > 1:
                self.stdout.write("ensure_admin: users exist, nothing to do")
            return
        self.stdout.write(first_start_notice(admin))
