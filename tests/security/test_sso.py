"""Single sign-on against a real OpenID provider: oidc-provider (OpenID Certified) on Node.

BooCode runs as deployed (Daphne in a subprocess, its own data folder); the provider is
tests/node/oidc_provider.mjs with BooCode registered as a confidential client, PKCE required. A
person signs in over HTTP (tests/support/oidc.py): BooCode's link, the provider's login and
consent pages, the callback. What is checked is what a person or an attacker would meet: the
account and groups a sign-in gives, which accounts an identity may take over, the state, nonce
and PKCE that bind a callback to the browser that started it, logout ending the session, its
sockets and the provider's session, the ID token kept on the server (and renewed there), and
passwords switched off.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import pytest

from tests.support.live import PASSWORD, Live, live_server
from tests.support.oidc import CLIENT_ID, OpenIdProvider, Person
from tests.support.processes import PYTHON, ROOT, free_port
from tests.support.tabs import Tab

pytestmark = pytest.mark.processes

ACCOUNTS: dict[str, dict[str, Any]] = {
    "dana": {
        "email": "dana@example.org",
        "email_verified": True,
        "preferred_username": "dana",
        "given_name": "Dana",
        "family_name": "Example",
        "groups": ["engineering", "on-call"],
    },
}


@dataclass
class Sso:
    """BooCode (``live``) and the provider it trusts."""

    live: Live
    provider: OpenIdProvider
    url: str

    def person(self) -> Person:
        return Person(self.url)

    def db(self, code: str) -> Any:
        """Run ``code`` (Django set up) on the server's database; what it puts in ``result``."""
        program = f"import django, json\ndjango.setup()\n{code}\nprint(json.dumps(result))"
        done = subprocess.run(
            [PYTHON, "-c", program], cwd=ROOT, env=self.live.env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    def account(self, username: str) -> dict[str, Any]:
        """The account's email, password state, groups and single sign-on identity."""
        return self.db(
            "from django.contrib.auth import get_user_model\n"
            f"u = get_user_model().objects.get(username={username!r})\n"
            "i = u.sso_identities.first()\n"
            "result = {'id': u.pk, 'email': u.email, 'password': u.has_usable_password(),\n"
            "  'name': [u.first_name, u.last_name],\n"
            "  'groups': sorted(u.groups.values_list('name', flat=True)),\n"
            "  'identity': i and {'subject': i.subject, 'linked_by': i.linked_by, 'groups': i.groups}}"
        )

    def local_account(self, username: str, email: str, *, admin: bool = False) -> None:
        """A local account with a password, made by an administrator (``admin``: staff and superuser)."""
        self.db(
            "from django.contrib.auth import get_user_model\n"
            f"get_user_model().objects.create_user({username!r}, {email!r}, 'a local password',\n"
            f"  is_staff={admin!r}, is_superuser={admin!r})\n"
            "result = None"
        )

    def usernames(self) -> list[str]:
        """Every account's username."""
        return self.db(
            "from django.contrib.auth import get_user_model\n"
            "result = sorted(get_user_model().objects.values_list('username', flat=True))"
        )

    def id_token(self, user_id: int, min_validity: float = 60) -> str | None:
        """What ``boocode.security.oidc.id_token_for`` answers for the person (in a server process)."""
        return self.db(
            "from boocode.security.oidc import id_token_for\n"
            f"result = id_token_for({user_id}, min_validity={min_validity})"
        )

    def signed_in_as(self, person: Person) -> str | None:
        """The username of the person's BooCode session (None: not logged in)."""
        return self.db(
            "from django.contrib.sessions.backends.db import SessionStore\n"
            "from django.contrib.auth import get_user_model\n"
            f"s = SessionStore({person.session!r})\n"
            "u = get_user_model().objects.filter(pk=s.get('_auth_user_id')).first()\n"
            "result = u and u.username"
        )


def sso_server(tmp: Path, accounts: dict[str, Any], **env: str) -> Iterator[Sso]:
    """BooCode with ``accounts`` (password :data:`PASSWORD`) and a provider with :data:`ACCOUNTS`."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    provider = OpenIdProvider.start(tmp, url, ACCOUNTS)
    try:
        with live_server(tmp, accounts, provider.env(**env), port=port) as live:
            yield Sso(live, provider, url)
    finally:
        provider.stop()


@pytest.fixture(scope="module")
def sso(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sso]:
    yield from sso_server(tmp_path_factory.mktemp("sso"), {"carol": {}})


@pytest.fixture(scope="module")
def sso_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sso]:
    """Passwords off; a new identity joins the account named after its subject."""
    yield from sso_server(
        tmp_path_factory.mktemp("sso-only"),
        {"kate": {"admin": True}},
        BOOCODE_LOCAL_LOGIN="false",
        BOOCODE_OIDC_LINK="subject",
    )


@pytest.fixture(scope="module")
def sso_staff_by_email(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sso]:
    """Linking by email allowed to reach staff accounts."""
    yield from sso_server(
        tmp_path_factory.mktemp("sso-staff"), {"carol": {}}, BOOCODE_OIDC_LINK_STAFF_BY_EMAIL="true"
    )


def claims_of(id_token: str) -> dict[str, Any]:
    payload = id_token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def with_query(url: str, **changes: str) -> str:
    parts = urlsplit(url)
    query = {key: values[0] for key, values in parse_qs(parts.query).items()}
    return urlunsplit(parts._replace(query=urlencode({**query, **changes})))


# --- signing in --------------------------------------------------------------------------------


def test_a_new_person_signs_in_and_gets_an_account_with_the_claims_groups(sso: Sso) -> None:
    person = sso.person()
    login_page = person.http.get(f"{sso.url}/login/").text
    assert 'href="/login/sso/"' in login_page and "Sign in with Example ID" in login_page
    assert 'name="password"' in login_page  # local accounts stay on beside it

    authorization = person.authorization_url()
    query = parse_qs(urlsplit(authorization).query)
    assert authorization.startswith(f"{sso.provider.issuer}/auth?")
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
    assert query["state"][0] and query["nonce"][0] and query["client_id"] == [CLIENT_ID]
    assert query["scope"] == ["openid email profile"]
    assert query["redirect_uri"] == [f"{sso.url}/login/sso/callback/"]

    callback = person.consent(authorization, "dana")
    answer = person.http.get(callback)
    assert answer.status_code == 302 and answer.headers["location"] == "/"
    chat = person.go(f"{sso.url}/")
    assert chat.status_code == 200 and 'id="message-input"' in chat.text
    assert 'id="password-link"' not in chat.text  # no password to change

    account = sso.account("dana")
    assert account["email"] == "dana@example.org" and account["password"] is False
    assert account["name"] == ["Dana", "Example"]
    assert account["groups"] == ["engineering", "on-call"]
    assert account["identity"] == {
        "subject": "dana",
        "linked_by": "created",
        "groups": ["engineering", "on-call"],
    }

    # The ID token is kept on the server, for later work; no page, header or cookie carries it.
    id_token = sso.id_token(account["id"])
    assert id_token is not None
    claims = claims_of(id_token)
    assert claims["sub"] == "dana" and claims["aud"] == CLIENT_ID and claims["nonce"] == query["nonce"][0]
    seen = [callback, answer.headers.get("location", ""), chat.text, str(chat.headers), str(answer.headers)]
    seen += [cookie.value or "" for cookie in person.http.cookies.jar]
    assert not any(id_token in text for text in seen)
    session = sso.db(
        "from django.contrib.sessions.models import Session\n"
        "result = [s.get_decoded() for s in Session.objects.all()]"
    )
    assert id_token not in json.dumps(session)


def test_the_groups_follow_the_claim_and_the_administrators_groups_stay(sso: Sso) -> None:
    sso.provider.set_account("erin", email="erin@example.org", email_verified=True, groups=["red", "blue"])
    assert sso.person().sign_in("erin").status_code == 200
    assert sso.account("erin")["groups"] == ["blue", "red"]
    # An administrator gives erin two groups of their own.
    sso.db(
        "from django.contrib.auth import get_user_model\nfrom django.contrib.auth.models import Group\n"
        "u = get_user_model().objects.get(username='erin')\n"
        "u.groups.add(*[Group.objects.get_or_create(name=n)[0] for n in ('green', 'yellow')])\nresult = None"
    )

    sso.provider.set_account(
        "erin", email="erin@example.org", email_verified=True, groups=["blue", "yellow", "purple"]
    )
    sso.person().sign_in("erin")
    account = sso.account("erin")
    assert account["groups"] == ["blue", "green", "purple", "yellow"]  # red is gone: the claim dropped it
    assert account["identity"]["groups"] == ["blue", "purple"]  # yellow stays the administrator's

    sso.provider.set_account("erin", email="erin@example.org", email_verified=True, groups=[])
    sso.person().sign_in("erin")
    assert sso.account("erin")["groups"] == ["green", "yellow"]


def test_a_verified_email_links_the_existing_account(sso: Sso) -> None:
    sso.local_account("frank", "frank@example.org")
    sso.provider.set_account(
        "frank-at-idp", email="Frank@Example.org", email_verified=True, preferred_username="fr"
    )
    person = sso.person()
    assert person.sign_in("frank-at-idp").status_code == 200
    assert sso.signed_in_as(person) == "frank"
    frank = sso.account("frank")
    assert frank["identity"]["linked_by"] == "email" and frank["identity"]["subject"] == "frank-at-idp"
    assert frank["password"] is True  # the local password is left as it was


def test_an_unverified_email_never_links_an_account(sso: Sso) -> None:
    sso.local_account("grace", "grace@example.org")
    sso.provider.set_account(
        "mallory", email="grace@example.org", email_verified=False, preferred_username="grace"
    )
    person = sso.person()
    assert person.sign_in("mallory").status_code == 200
    # A new account of their own, named apart from grace's and without the unverified address.
    assert sso.signed_in_as(person) == "grace-2"
    assert sso.account("grace-2")["email"] == "" and sso.account("grace")["identity"] is None


def test_a_verified_email_never_links_an_administrators_account(sso: Sso) -> None:
    sso.local_account("root-admin", "boss@example.org", admin=True)
    sso.provider.set_account(
        "boss-at-idp", email="Boss@Example.org", email_verified=True, preferred_username="root-admin"
    )
    before = sso.usernames()
    person = sso.person()
    answer = person.sign_in("boss-at-idp")
    assert answer.status_code == 403
    assert (
        "Your email address belongs to a BooCode administrator&#x27;s account, which single sign-on "
        "does not link by email" in answer.text
    ), answer.text[-3000:]
    assert sso.signed_in_as(person) is None
    assert sso.account("root-admin")["identity"] is None and sso.usernames() == before


def test_with_the_setting_on_a_verified_email_links_an_administrators_account(
    sso_staff_by_email: Sso,
) -> None:
    sso = sso_staff_by_email
    sso.local_account("root-admin", "boss@example.org", admin=True)
    sso.provider.set_account("boss-at-idp", email="boss@example.org", email_verified=True)
    person = sso.person()
    assert person.sign_in("boss-at-idp").status_code == 200
    assert sso.signed_in_as(person) == "root-admin"
    assert sso.account("root-admin")["identity"]["linked_by"] == "email"


# --- what binds a callback to its browser --------------------------------------------------------


def test_a_callback_works_once_and_only_in_the_browser_that_started_it(sso: Sso) -> None:
    sso.provider.set_account("hugo", email="hugo@example.org", email_verified=True)
    started, other = sso.person(), sso.person()
    callback = started.consent(started.authorization_url(), "hugo")

    # Another browser (a link sent to a victim: login CSRF) gets nothing from it.
    elsewhere = other.http.get(callback)
    assert elsewhere.status_code == 400 and "was not started in this browser" in elsewhere.text
    assert other.session is None or sso.signed_in_as(other) is None

    tampered = started.http.get(with_query(callback, state="not-the-state"))
    assert tampered.status_code == 400
    assert started.http.get(callback).status_code == 302  # the real one still works, once
    assert sso.signed_in_as(started) == "hugo"
    replayed = sso.person()
    replayed.http.cookies = started.http.cookies
    assert replayed.http.get(callback).status_code == 400


def test_an_id_token_with_another_nonce_is_refused(sso: Sso) -> None:
    person = sso.person()
    # The authorization request altered on its way to the provider: the ID token carries that nonce.
    authorization = with_query(person.authorization_url(), nonce="a nonce BooCode never sent")
    answer = person.http.get(person.consent(authorization, "dana"))
    assert answer.status_code == 403 and "could not be verified" in answer.text
    assert person.session is None or sso.signed_in_as(person) is None


def test_a_code_without_its_pkce_verifier_is_refused(sso: Sso) -> None:
    # Two sign-ins in one browser; the first one's code comes back with the second one's state,
    # so BooCode sends the second verifier: the provider refuses the code.
    person = sso.person()
    first = person.authorization_url()
    second_state = parse_qs(urlsplit(person.authorization_url()).query)["state"][0]
    callback = person.consent(first, "dana")
    answer = person.http.get(with_query(callback, state=second_state))
    assert answer.status_code == 403 and "refused the sign-in (invalid_grant)" in answer.text
    assert person.session is None or sso.signed_in_as(person) is None


def test_a_sign_in_the_person_cancels_at_the_provider_says_so(sso: Sso) -> None:
    person = sso.person()
    page = person.go(person.authorization_url())
    uid = urlsplit(str(page.url)).path.rstrip("/").rsplit("/", 1)[1]
    answer = person.go(
        f"{sso.provider.issuer}/interaction/{uid}/abort", stop_at=f"{sso.url}/login/sso/callback/"
    )
    back = person.http.get(answer.headers["location"])
    assert back.status_code == 403 and "did not complete (access_denied)" in back.text
    assert 'href="/login/sso/"' in back.text  # the way to try again


# --- logout and the kept tokens -----------------------------------------------------------------


async def test_logout_ends_the_session_its_sockets_and_the_providers_session(sso: Sso) -> None:
    sso.provider.set_account("henry", email="henry@example.org", email_verified=True)
    person = sso.person()
    assert person.sign_in("henry").status_code == 200
    henry = sso.account("henry")
    conversation = sso.db(
        "from boocode.chat.models import Conversation\n"
        f"result = Conversation.objects.create(owner_id={henry['id']}).pk"
    )
    id_token = sso.id_token(henry["id"])
    tab = Tab.live(sso.live.port, {"cookie": person.session, "conversation": conversation})
    async with tab:
        answer = person.csrf_post("/logout/")
        assert answer.status_code == 200  # a page that continues to the provider's logout
        with pytest.raises(AssertionError, match="the socket ended: CLOSE 4401"):
            await tab.next("error")
    link = answer.text.split('id="oauth-continue" class="sso-button" href="', 1)[1].split('"', 1)[0]
    logout = link.replace("&amp;", "&")
    query = parse_qs(urlsplit(logout).query)
    assert logout.startswith(f"{sso.provider.issuer}/session/end?")
    assert query["post_logout_redirect_uri"] == [f"{sso.url}/login/"] and query["client_id"] == [CLIENT_ID]
    assert query["id_token_hint"] == [id_token]  # its last use: forgotten on the server now
    assert sso.id_token(henry["id"]) is None
    assert person.http.get(f"{sso.url}/").status_code == 302

    # At the provider: confirm, and the provider sends the person back to BooCode's login page.
    confirm = person.go(logout)
    xsrf = confirm.text.split('name="xsrf" value="', 1)[1].split('"', 1)[0]
    action = confirm.text.split('action="', 1)[1].split('"', 1)[0]
    back = person.go(
        f"{sso.provider.issuer}{action}" if action.startswith("/") else action, xsrf=xsrf, logout="yes"
    )
    assert str(back.url) == f"{sso.url}/login/" and back.status_code == 200
    # The provider's session is over: the next sign-in asks for a login again.
    again = person.go(person.authorization_url(), stop_at=f"{sso.url}/login/sso/callback/")
    assert again.status_code == 200 and 'name="login"' in again.text


def test_the_id_token_is_renewed_with_the_refresh_token(sso: Sso) -> None:
    sso.provider.set_account("ivy", email="ivy@example.org", email_verified=True)
    assert sso.person().sign_in("ivy").status_code == 200
    ivy = sso.account("ivy")["id"]
    first = sso.id_token(ivy)
    assert first is not None
    # Asked for a token valid longer than the one kept: renewed at the provider.
    renewed = sso.id_token(ivy, min_validity=10**8)
    assert renewed is not None and renewed != first
    assert claims_of(renewed)["sub"] == "ivy" and claims_of(renewed)["iat"] >= claims_of(first)["iat"]
    assert sso.id_token(ivy) == renewed
    # A refresh token the provider refuses is dropped, never sent again; the kept token still serves.
    dropped = sso.db(
        "import json\nfrom mcpclient.secrets.store import get_secret, put_secret\n"
        f"r = json.loads(get_secret('oidc', 'user:{ivy}'))\n"
        f"put_secret('oidc', 'user:{ivy}', json.dumps({{**r, 'refresh_token': 'not a refresh token'}}))\n"
        f"from boocode.security.oidc import id_token_for\nrenewed = id_token_for({ivy}, min_validity=10**8)\n"
        f"result = [renewed, json.loads(get_secret('oidc', 'user:{ivy}'))['refresh_token']]"
    )
    assert dropped == [None, None]
    assert sso.id_token(ivy) == renewed


# --- passwords off ----------------------------------------------------------------------------------


def test_with_passwords_off_only_the_provider_signs_people_in(sso_only: Sso) -> None:
    person = sso_only.person()
    page = person.http.get(f"{sso_only.url}/login/").text
    assert "Sign in with Example ID" in page and 'name="password"' not in page and "Forgot" not in page

    refused = person.csrf_post("/login/", username="kate", password=PASSWORD)
    assert refused.status_code == 403 and "turned off" in refused.text
    assert person.http.get(f"{sso_only.url}/password/reset/").status_code == 404
    admin = person.http.get(f"{sso_only.url}/admin/login/?next=/admin/")
    assert admin.status_code == 302 and admin.headers["location"] == "/login/?next=%2Fadmin%2F"

    # kate's identity at the provider has her account's name as its subject: it links to it.
    answer = person.sign_in("kate", next_url="/admin/")
    assert str(answer.url) == f"{sso_only.url}/admin/" and answer.status_code == 200
    assert sso_only.account("kate")["identity"]["linked_by"] == "subject"
    assert person.http.get(f"{sso_only.url}/admin/password_change/").status_code == 404


@pytest.mark.parametrize(
    ("env", "error"),
    [
        ({"BOOCODE_OIDC_ISSUER": "http://login.example.com"}, "http:// only for localhost"),
        ({"BOOCODE_OIDC_ISSUER": "https://login.example.com"}, "needs BOOCODE_OIDC_CLIENT_ID"),
        ({"BOOCODE_OIDC_CLIENT_ID": "boocode"}, "BOOCODE_OIDC_ISSUER is not"),
        ({"BOOCODE_LOCAL_LOGIN": "false"}, "without single sign-on nobody could log in"),
        ({"BOOCODE_OIDC_LINK": "username"}, "expected one of email, subject, none"),
        (
            {
                "BOOCODE_OIDC_ISSUER": "https://id.example.com",
                "BOOCODE_OIDC_CLIENT_ID": "b",
                "BOOCODE_OIDC_SCOPES": "email",
            },
            "must include openid",
        ),
    ],
)
def test_settings_that_cannot_work_stop_start_up(tmp_path: Path, env: dict[str, str], error: str) -> None:
    full = {**os.environ, "BOOCODE_DATA_DIR": str(tmp_path), **env}
    result = subprocess.run(
        [PYTHON, "manage.py", "check"], cwd=ROOT, env=full, capture_output=True, text=True
    )
    assert result.returncode != 0 and error in result.stderr, result.stderr[-2000:]
