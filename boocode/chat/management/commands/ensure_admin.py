"""``manage.py ensure_admin``: on a fresh install, create the first account.

If no user exists, create the superuser ``admin`` with BOOCODE_ADMIN_PASSWORD, or with a
generated password printed once (it is stored only as a hash). Otherwise do nothing.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

ADMIN_USERNAME = "admin"


class Command(BaseCommand):
    help = "Create the superuser 'admin' if no user exists (BOOCODE_ADMIN_PASSWORD or a generated password)."

    def handle(self, *args: Any, **options: Any) -> None:
        """Create the account, or say briefly that users exist."""
        user_model = get_user_model()
        with transaction.atomic():
            if user_model.objects.exists():
                if options["verbosity"] > 1:
                    self.stdout.write("ensure_admin: users exist, nothing to do")
                return
            password = settings.ADMIN_PASSWORD or secrets.token_urlsafe(12)
            user_model.objects.create_superuser(username=ADMIN_USERNAME, email="", password=password)
        if settings.ADMIN_PASSWORD:
            self.stdout.write(
                f"Created superuser '{ADMIN_USERNAME}' with the password from BOOCODE_ADMIN_PASSWORD."
            )
        else:
            self.stdout.write(
                f"Created superuser '{ADMIN_USERNAME}' with password: {password}\n"
                "This password is shown only once; change it in the admin (/admin/) after logging in."
            )
