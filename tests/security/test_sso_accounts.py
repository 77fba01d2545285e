"""Which account a verified identity signs in to, and the pages with single sign-on on or off.

In one process: :func:`boocode.security.sso_accounts.account_for` is given the claims a verified
ID token carries (the flow itself, with a real provider, is tests/security/test_sso.py), and the
login page and the password pages are read through Django's client under each setting.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from boocode.security.models import SsoIdentity
from boocode.security.sso_accounts import SignInRefused, account_for, username_for
from tests.support.accounts import client_of

pytestmark = pytest.mark.django_db

ISSUER = "https://id.example.com"


@pytest.fixture(autouse=True)
def provider(settings: Any) -> None:
    settings.OIDC_ISSUER = ISSUER
    settings.OIDC_CLIENT_ID = "boocode"
    settings.OIDC_NAME = "Example ID"


def user(username: str, email: str = "", **fields: Any) -> Any:
    return get_user_model().objects.create_user(username, email, "a password", **fields)


def test_usernames_are_made_safe_and_never_reuse_a_name() -> None:
    user("dana")
    assert username_for({"sub": "1", "preferred_username": "Dana"}) == "Dana-2"  # "dana" in another case
    assert username_for({"sub": "2", "preferred_username": "Ann Lee <ann>!"}) == "AnnLeeann"
    assert username_for({"sub": "3", "email": "bo.b+x@example.org"}) == "bo.b+x"
    assert username_for({"sub": "4", "preferred_username": "!!!", "name": "Ünal"}) == "Ünal"
    assert username_for({"sub": "5"}) == "user"
    assert len(username_for({"sub": "6", "preferred_username": "x" * 400})) <= 150
    # Leading dots are dropped: "..dana" is no look-alike of dana's name, just another "dana".
    assert username_for({"sub": "7", "preferred_username": "..dana"}) == "dana-2"
    assert username_for({"sub": "8", "preferred_username": "...", "email": ".eve@example.org"}) == "eve"


def test_an_identity_keeps_its_account_whatever_its_email_says_later() -> None:
    first = account_for(ISSUER, {"sub": "s-1", "email": "a@example.org", "email_verified": True})
    user("other", "b@example.org")
    again = account_for(ISSUER, {"sub": "s-1", "email": "b@example.org", "email_verified": True})
    assert again.pk == first.pk


def test_linking_by_email_needs_a_verified_address_and_one_account(settings: Any) -> None:
    settings.OIDC_LINK = "email"
    ann = user("ann", "ann@example.org")
    assert (
        account_for(ISSUER, {"sub": "a", "email": "ANN@example.org", "email_verified": "true"}).pk == ann.pk
    )
    # Unverified (or the claim missing): a new account of its own, without the address.
    for sub, verified in (("b", False), ("c", None), ("d", "yes")):
        claims = {
            "sub": sub,
            "email": "ann@example.org",
            **({"email_verified": verified} if verified is not None else {}),
        }
        made = account_for(ISSUER, claims)
        assert made.pk != ann.pk and made.email == "" and not made.has_usable_password()
    # Two accounts with the address: none is chosen.
    user("twin1", "twin@example.org")
    user("twin2", "twin@example.org")
    with pytest.raises(SignInRefused, match="More than one BooCode account"):
        account_for(ISSUER, {"sub": "t", "email": "twin@example.org", "email_verified": True})
    assert not SsoIdentity.objects.filter(subject="t").exists()


@pytest.mark.parametrize("rights", [{"is_staff": True}, {"is_superuser": True}])
def test_linking_by_email_reaches_staff_accounts_only_when_allowed(
    settings: Any, rights: dict[str, bool]
) -> None:
    settings.OIDC_LINK = "email"
    boss = user("boss", "boss@example.org", **rights)
    claims = {"sub": "boss-1", "email": "boss@example.org", "email_verified": True}
    with pytest.raises(SignInRefused, match="belongs to a BooCode administrator's account"):
        account_for(ISSUER, claims)
    assert not SsoIdentity.objects.exists() and get_user_model().objects.count() == 1
    settings.OIDC_LINK_STAFF_BY_EMAIL = True
    assert account_for(ISSUER, claims).pk == boss.pk


def test_an_account_takes_one_identity_of_a_provider(settings: Any) -> None:
    settings.OIDC_LINK = "email"
    bea = user("bea", "bea@example.org")
    account_for(ISSUER, {"sub": "bea-1", "email": "bea@example.org", "email_verified": True})
    with pytest.raises(SignInRefused, match="linked to another identity"):
        account_for(ISSUER, {"sub": "bea-2", "email": "bea@example.org", "email_verified": True})
    assert list(bea.sso_identities.values_list("subject", flat=True)) == ["bea-1"]


def test_linking_by_subject_or_not_at_all(settings: Any) -> None:
    named = user("0f9c-subject", "cal@example.org")
    settings.OIDC_LINK = "subject"
    assert account_for(ISSUER, {"sub": "0f9c-subject"}).pk == named.pk
    # ... and a verified email does not link in this mode.
    cal = account_for(ISSUER, {"sub": "another", "email": "cal@example.org", "email_verified": True})
    assert cal.pk != named.pk
    settings.OIDC_LINK = "none"
    dee = user("dee", "dee@example.org")
    assert (
        account_for(ISSUER, {"sub": "dee", "email": "dee@example.org", "email_verified": True}).pk != dee.pk
    )


def test_no_new_accounts_and_no_deactivated_ones(settings: Any) -> None:
    settings.OIDC_CREATE_ACCOUNTS = False
    count = get_user_model().objects.count()
    with pytest.raises(SignInRefused, match="new ones are not made here"):
        account_for(ISSUER, {"sub": "stranger", "email": "s@example.org", "email_verified": True})
    assert get_user_model().objects.count() == count and not SsoIdentity.objects.exists()
    user("eve", "eve@example.org", is_active=False)
    with pytest.raises(SignInRefused, match="deactivated"):
        account_for(ISSUER, {"sub": "eve", "email": "eve@example.org", "email_verified": True})


def test_the_groups_claim_is_read_as_configured(settings: Any) -> None:
    settings.OIDC_GROUPS_CLAIM = "roles"
    person = account_for(
        ISSUER, {"sub": "r", "roles": ["admins", 7, "", " ops ", "x" * 200], "groups": ["no"]}
    )
    assert sorted(person.groups.values_list("name", flat=True)) == ["admins", "ops"]
    account_for(ISSUER, {"sub": "r", "roles": "admins"})  # one group as a string
    assert list(person.groups.values_list("name", flat=True)) == ["admins"]
    settings.OIDC_GROUPS_CLAIM = ""  # groups left alone
    account_for(ISSUER, {"sub": "r", "roles": []})
    assert list(person.groups.values_list("name", flat=True)) == ["admins"]
    assert Group.objects.filter(name="ops").exists()  # a group is never deleted, only left


def test_without_a_provider_the_login_page_is_as_before(settings: Any) -> None:
    settings.OIDC_ISSUER = ""
    page = Client().get("/login/").content.decode()
    assert "Sign in with" not in page and 'name="password"' in page and "autofocus" in page
    assert Client().get("/login/sso/").status_code == 404
    assert Client().get("/login/sso/callback/?code=x&state=y").status_code == 404


def test_with_passwords_off_the_password_pages_are_gone(settings: Any) -> None:
    settings.LOCAL_LOGIN = False
    client, _ = client_of("olga")
    chat = client.get("/").content.decode()
    assert 'id="password-link"' not in chat and "Log out" in chat
    assert client.get("/password/").status_code == 404
    assert Client().get("/password/reset/").status_code == 404
    page = Client().get("/login/").content.decode()
    assert "Sign in with Example ID" in page and 'name="password"' not in page
    settings.LOCAL_LOGIN = True
    assert 'id="password-link"' in client.get("/").content.decode()


def test_a_deleted_accounts_sign_on_tokens_go_with_it() -> None:
    # The receiver is connected at start without importing the single sign-on module (imported
    # at its first use); the deletion still takes the person's stored tokens along.
    from django.contrib.auth import get_user_model

    from boocode.security import oidc
    from mcpclient.secrets.store import get_secret

    carol = get_user_model().objects.create_user("carol")
    sign_in = oidc.SignIn("https://id.example", {"sub": "c-1"}, "id-token", 0, None)
    oidc.store_tokens(carol.pk, sign_in)
    assert get_secret("oidc", f"user:{carol.pk}") is not None
    carol.delete()
    assert get_secret("oidc", f"user:{carol.pk}") is None
