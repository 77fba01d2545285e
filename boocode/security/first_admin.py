"""The first account of a fresh install, and what the first start says about it.

:func:`create_first_admin` creates the superuser ``admin`` when no user exists at all, with
``BOOCODE_ADMIN_PASSWORD`` or a generated password that is stored only as a hash.
:func:`first_start_notice` is what ``make run`` prints last about it, in a frame: the password
(once), where to log in, how to change it (the sidebar's *Password* link, as the README says)
and how to give the account an email, which *Forgot your password?* needs.
"""

from __future__ import annotations

import os
import secrets
import sys
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction
from django.urls import reverse

__all__ = ["ADMIN_USERNAME", "FirstAdmin", "create_first_admin", "first_start_notice", "framed"]

ADMIN_USERNAME = "admin"


@dataclass(frozen=True)
class FirstAdmin:
    """The account just created: ``password`` is the generated one, or None when it came from
    ``BOOCODE_ADMIN_PASSWORD`` (never printed)."""

    pk: int
    username: str
    password: str | None


def create_first_admin(password: str = "") -> FirstAdmin | None:
    """Create the superuser ``admin`` with ``password`` (empty: a generated one) if no user exists."""
    user_model = get_user_model()
    with transaction.atomic():
        if user_model.objects.exists():
            return None
        chosen = password or secrets.token_urlsafe(12)
        user = user_model.objects.create_superuser(username=ADMIN_USERNAME, email="", password=chosen)
    return FirstAdmin(pk=user.pk, username=user.get_username(), password=None if password else chosen)


def framed(lines: list[str]) -> str:
    """``lines`` in an ASCII box, so that they stand out of the output around them."""
    width = max(len(line) for line in lines)
    rule = f"+{'-' * (width + 2)}+"
    return "\n".join([rule, *(f"| {line.ljust(width)} |" for line in lines), rule])


def _python() -> str:
    """This interpreter as a person would type it here (``.venv/bin/python`` in the checkout)."""
    relative = os.path.relpath(sys.executable)
    return sys.executable if relative.startswith("..") else relative


def first_start_notice(admin: FirstAdmin, *, site: str = "") -> str:
    """What to tell the person starting BooCode for the first time about ``admin``, framed.

    ``site``: where BooCode is served (``http://127.0.0.1:8000``), if known.
    """
    name = admin.username
    login = f"Log in at {site}/" if site else "Log in"
    email_page = f"{site}{reverse('admin:auth_user_change', args=[admin.pk])}"
    if admin.password is None:
        lines = [
            f"BooCode's first account: {name}, with the password in BOOCODE_ADMIN_PASSWORD.",
            f"{login}; the sidebar's Password link changes it.",
        ]
    else:
        lines = [
            f"BooCode's first account: {name}",
            f"Password: {admin.password}   (shown only this once)",
            f"{login} and change it with the sidebar's Password link.",
            f"Missed it? {_python()} manage.py changepassword {name}",
        ]
    return framed(
        [
            *lines,
            "",
            f'"Forgot your password?" mails a link to the account\'s email; {name} has none yet.',
            f"Give it one on its page in the admin: {email_page}",
        ]
    )
