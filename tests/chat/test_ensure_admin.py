"""``manage.py ensure_admin``: the first account on a fresh install."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def run() -> str:
    out = StringIO()
    call_command("ensure_admin", stdout=out)
    return out.getvalue()


def test_generated_password_is_printed_once_and_works(settings: Any) -> None:
    settings.ADMIN_PASSWORD = ""
    output = run()
    password = output.split("Password: ", 1)[1].split()[0]
    assert "(shown only this once)" in output and "the sidebar's Password link" in output
    assert "Give it one on its page in the admin: /admin/auth/user/" in output  # no email yet
    user = authenticate(username="admin", password=password)
    assert user is not None and user.is_superuser and user.is_staff
    assert run() == ""  # users exist: nothing printed, nothing changed
    assert get_user_model().objects.count() == 1


def test_password_from_the_environment_is_not_printed(settings: Any) -> None:
    settings.ADMIN_PASSWORD = "from-the-env-123"
    output = run()
    assert "from-the-env-123" not in output and "BOOCODE_ADMIN_PASSWORD" in output
    assert authenticate(username="admin", password="from-the-env-123") is not None


def test_existing_users_are_left_alone(settings: Any) -> None:
    get_user_model().objects.create_user("someone")
    assert run() == ""
    assert not get_user_model().objects.filter(username="admin").exists()
