"""The encrypted secret store: real database rows, real Fernet keys, the rotation command."""

from __future__ import annotations

import base64
import logging
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from mcpclient.models import StoredSecret
from mcpclient.secrets.store import (
    SecretKeyError,
    SecretUnreadable,
    delete_secret,
    get_secret,
    put_secret,
    rotate_key,
    secret_names,
)

# Also run on PostgreSQL (make test): the store is a database feature.
pytestmark = [pytest.mark.postgres]

VALUE = "ghp_s3cretTokenValue1234567890"
KEY_A, KEY_B, KEY_C = (Fernet.generate_key().decode() for _ in range(3))


@pytest.fixture
def keys(settings: Any, tmp_path: Path) -> Any:
    """Settings with their own key file and no BOOCODE_SECRETS_KEY; set ``SECRETS_KEYS`` per test."""
    settings.SECRETS_KEYS = []
    settings.SECRETS_KEY_FILE = tmp_path / "secrets.key"
    return settings


def raw_ciphertexts() -> dict[str, str]:
    """The stored column as the database holds it, read with SQL rather than through the model."""
    table = StoredSecret._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT kind, name, ciphertext FROM {table}")
        return {f"{kind}:{name}": text for kind, name, text in cursor.fetchall()}


@pytest.mark.django_db
def test_a_stored_value_reads_back_but_is_not_in_the_database(keys: Any) -> None:
    put_secret("input", "github-token", VALUE)
    put_secret("input", "other", "second value")
    put_secret("oauth", "github", "an oauth token")

    assert get_secret("input", "github-token") == VALUE
    assert get_secret("input", "absent") is None
    assert secret_names("input") == ["github-token", "other"]
    raw = raw_ciphertexts()["input:github-token"]
    assert VALUE not in raw and "s3cret" not in raw
    # Not merely encoded: the column's bytes, base64-decoded, do not hold the value either.
    assert VALUE.encode() not in base64.urlsafe_b64decode(raw)

    put_secret("input", "github-token", "replaced")
    assert get_secret("input", "github-token") == "replaced"
    assert StoredSecret.objects.filter(kind="input", name="github-token").count() == 1
    assert delete_secret("input", "github-token") is True
    assert delete_secret("input", "github-token") is False
    assert get_secret("input", "github-token") is None


@pytest.mark.django_db
def test_the_key_file_is_generated_once_private_and_only_when_storing(keys: Any) -> None:
    key_file: Path = keys.SECRETS_KEY_FILE
    assert get_secret("input", "nothing-yet") is None
    assert not key_file.exists()  # reading an empty store creates no key

    put_secret("input", "a", "one")
    assert key_file.stat().st_mode & 0o777 == 0o600
    key = key_file.read_text()
    put_secret("input", "b", "two")
    assert key_file.read_text() == key
    # The file's key is what decrypts: given explicitly, it reads the rows.
    keys.SECRETS_KEYS = [key.strip()]
    assert get_secret("input", "a") == "one"


@pytest.mark.django_db
def test_another_key_cannot_read_a_row_and_says_so(keys: Any) -> None:
    keys.SECRETS_KEYS = [KEY_A]
    put_secret("input", "github-token", VALUE)

    keys.SECRETS_KEYS = [KEY_B]
    with pytest.raises(SecretUnreadable) as caught:
        get_secret("input", "github-token")
    message = str(caught.value)
    assert 'input "github-token"' in message and "key is wrong or missing" in message
    assert "BOOCODE_SECRETS_KEY" in message
    assert VALUE not in message and KEY_A not in message and KEY_B not in message

    # No key at all (variable unset, no key file): the same clear error, saying it is missing.
    keys.SECRETS_KEYS = []
    with pytest.raises(SecretUnreadable, match=r'input "github-token": the encryption key is missing'):
        get_secret("input", "github-token")


@pytest.mark.django_db
def test_a_malformed_key_names_the_variable_not_the_key(keys: Any) -> None:
    keys.SECRETS_KEYS = [KEY_A, "not-a-fernet-key"]
    with pytest.raises(SecretKeyError) as caught:
        put_secret("input", "x", "y")
    assert "BOOCODE_SECRETS_KEY: key 2 of 2 is not a Fernet key" in str(caught.value)
    assert "not-a-fernet-key" not in str(caught.value)
    assert not StoredSecret.objects.exists()


@pytest.mark.django_db
def test_a_row_copied_over_another_is_refused(keys: Any) -> None:
    put_secret("input", "harmless", "public-ish")
    put_secret("input", "admin-token", VALUE)
    stolen = StoredSecret.objects.get(name="admin-token").ciphertext
    StoredSecret.objects.filter(name="harmless").update(ciphertext=stolen)
    with pytest.raises(SecretUnreadable, match='input "harmless" holds the value of another secret'):
        get_secret("input", "harmless")


@pytest.mark.django_db
def test_rotation_re_encrypts_so_the_old_key_can_be_dropped(keys: Any) -> None:
    keys.SECRETS_KEYS = [KEY_A]
    put_secret("input", "github-token", VALUE)
    put_secret("oauth", "docs", "refresh-token")
    before = raw_ciphertexts()

    keys.SECRETS_KEYS = [KEY_B, KEY_A]  # new key first, old key after it
    assert get_secret("input", "github-token") == VALUE  # still readable mid-rotation
    out = StringIO()
    call_command("secrets_rotate", stdout=out)
    assert "re-encrypted 2 stored secrets with the first key" in out.getvalue()
    assert "remove them" in out.getvalue()
    after = raw_ciphertexts()
    assert all(after[name] != before[name] for name in before)

    keys.SECRETS_KEYS = [KEY_B]  # old key dropped
    assert get_secret("input", "github-token") == VALUE
    assert get_secret("oauth", "docs") == "refresh-token"
    keys.SECRETS_KEYS = [KEY_A]  # only the old key: the rows are lost to it
    with pytest.raises(SecretUnreadable, match='input "github-token"'):
        get_secret("input", "github-token")


@pytest.mark.django_db
def test_rotation_is_all_or_nothing(keys: Any) -> None:
    keys.SECRETS_KEYS = [KEY_A]
    put_secret("input", "kept", "one")
    keys.SECRETS_KEYS = [KEY_C]
    put_secret("input", "orphan", "two")  # stored with a key that is then forgotten
    before = raw_ciphertexts()

    keys.SECRETS_KEYS = [KEY_B, KEY_A]
    with pytest.raises(CommandError) as caught:
        call_command("secrets_rotate", stdout=StringIO())
    assert 'input "orphan"' in str(caught.value) and "Nothing was changed" in str(caught.value)
    assert 'input "kept"' not in str(caught.value)
    assert raw_ciphertexts() == before


@pytest.mark.django_db
def test_generate_key_prints_a_usable_key(keys: Any) -> None:
    out = StringIO()
    call_command("secrets_rotate", "--generate-key", stdout=out)
    key = out.getvalue().strip()
    keys.SECRETS_KEYS = [key]
    put_secret("input", "x", "y")
    assert get_secret("input", "x") == "y"


@pytest.mark.django_db
def test_values_never_reach_the_log(keys: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    keys.SECRETS_KEYS = [KEY_A]
    put_secret("input", "github-token", VALUE)
    get_secret("input", "github-token")
    keys.SECRETS_KEYS = [KEY_B, KEY_A]
    rotate_key()
    delete_secret("input", "github-token")
    assert 'stored input "github-token"' in caplog.text
    assert VALUE not in caplog.text and KEY_A not in caplog.text and KEY_B not in caplog.text
