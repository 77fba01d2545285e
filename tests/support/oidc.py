"""A real OpenID provider for the single sign-on tests, and a person signing in without a browser.

:class:`OpenIdProvider` runs ``tests/node/oidc_provider.mjs`` (oidc-provider, the OpenID
Certified implementation) on 127.0.0.1, named ``localhost`` in its issuer so that its cookies and
BooCode's (at 127.0.0.1) stay apart as they would on two hosts. Its accounts are a JSON file read
at every sign-in: :meth:`OpenIdProvider.set_account` changes a person's claims between two.

:class:`Person` is a browser's part in the flow over plain HTTP: it keeps both sites' cookies,
follows redirects one by one (recording them), and fills in the provider's own login and consent
pages (its development pages: any login, the password ignored).
"""

from __future__ import annotations

import html
import json
import re
import secrets
import shutil
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx2

from tests.support.processes import NODE_DIR, HttpServer, free_port

PROVIDER_SCRIPT = NODE_DIR / "oidc_provider.mjs"
CLIENT_ID = "boocode-tests"
CLIENT_SECRET = "a client secret only the tests know"
_FORM_ACTION = re.compile(r'<form[^>]*action="([^"]+)"[^>]*method="post"', re.IGNORECASE)


@dataclass
class OpenIdProvider:
    """A running ``oidc_provider.mjs``, with BooCode at ``boocode_url`` registered as its client."""

    server: HttpServer
    issuer: str
    accounts_file: Path
    boocode_url: str

    @classmethod
    def start(
        cls, folder: Path, boocode_url: str, accounts: dict[str, dict[str, Any]], *, id_token_ttl: int = 3600
    ) -> OpenIdProvider:
        """Start the provider on a free port, its files in ``folder``; :meth:`stop` it."""
        node = shutil.which("node")
        assert node, "node is not installed"
        port = free_port()
        issuer = f"http://localhost:{port}"
        accounts_file = folder / "oidc-accounts.json"
        accounts_file.write_text(json.dumps(accounts))
        settings = {
            "port": port,
            "issuer": issuer,
            "accounts": str(accounts_file),
            "id_token_ttl": id_token_ttl,
            "clients": [
                {
                    "client_id": CLIENT_ID,
                    "client_secret": CLIENT_SECRET,
                    "redirect_uris": [f"{boocode_url}/login/sso/callback/"],
                    "post_logout_redirect_uris": [f"{boocode_url}/login/"],
                }
            ],
        }
        settings_file = folder / "oidc-provider.json"
        settings_file.write_text(json.dumps(settings))
        # A deadline, not a wait: Node loads the provider's modules slowly on a loaded machine (it took
        # over 30 s once, beside the page's, PostgreSQL's and the conformance suite's processes).
        server = HttpServer(
            [node, str(PROVIDER_SCRIPT), str(settings_file)], port, "/", cwd=NODE_DIR, start_within=120.0
        )
        return cls(server=server, issuer=issuer, accounts_file=accounts_file, boocode_url=boocode_url)

    def stop(self) -> None:
        self.server.stop()

    def env(self, **more: str) -> dict[str, str]:
        """The BOOCODE_* variables that point BooCode at this provider (``more`` added)."""
        return {
            "BOOCODE_OIDC_ISSUER": self.issuer,
            "BOOCODE_OIDC_CLIENT_ID": CLIENT_ID,
            "BOOCODE_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "BOOCODE_OIDC_NAME": "Example ID",
            "BOOCODE_PUBLIC_URL": self.boocode_url,
            **more,
        }

    def set_account(self, login: str, **claims: Any) -> None:
        """Give ``login`` these claims from the next sign-in on."""
        accounts = json.loads(self.accounts_file.read_text())
        accounts[login] = claims
        self.accounts_file.write_text(json.dumps(accounts))


@dataclass
class Person:
    """Someone signing in over HTTP: cookies of both sites, every redirect followed by hand."""

    boocode_url: str
    http: httpx2.Client = field(default_factory=lambda: httpx2.Client(timeout=30.0))
    visited: list[str] = field(default_factory=list)

    def close(self) -> None:
        self.http.close()

    @property
    def session(self) -> str | None:
        """BooCode's session cookie, if it has one."""
        return next((c.value for c in self.http.cookies.jar if c.name == "sessionid"), None)

    def go(self, url: str, *, stop_at: str | None = None, **form: str) -> httpx2.Response:
        """GET ``url`` (POST ``form`` when given) and follow redirects, at most 12; one that
        leads to a URL starting with ``stop_at`` is not followed (its response is returned)."""
        if form:
            response = self.http.post(url, data=form)
        else:
            response = self.http.get(url)
        self.visited.append(url)
        for _ in range(12):
            if not response.is_redirect:
                return response
            target = urljoin(str(response.url), response.headers["location"])
            if stop_at and target.startswith(stop_at):
                return response
            self.visited.append(target)
            response = self.http.get(target)
        raise AssertionError(f"more than 12 redirects: {self.visited[-12:]}")

    def authorization_url(self, next_url: str = "") -> str:
        """Start at BooCode's link: the provider's authorization URL it redirects to."""
        start = f"{self.boocode_url}/login/sso/" + (f"?next={next_url}" if next_url else "")
        response = self.http.get(start)
        assert response.status_code == 302, (response.status_code, response.text[:500])
        return response.headers["location"]

    def consent(self, authorization_url: str, login: str) -> str:
        """At the provider: log in as ``login`` and consent; the callback URL (not yet visited)."""
        callback = f"{self.boocode_url}/login/sso/callback/"
        page = self.go(authorization_url, stop_at=callback)
        for _ in range(3):
            if page.is_redirect:
                return page.headers["location"]
            assert page.status_code == 200, (page.status_code, page.text[:500])
            form = _FORM_ACTION.search(page.text)
            assert form, f"no form on the provider's page: {page.text[:500]}"
            action = urljoin(str(page.url), html.unescape(form.group(1)))
            if 'name="login"' in page.text:
                page = self.go(action, stop_at=callback, prompt="login", login=login, password="any")
            else:
                page = self.go(action, stop_at=callback, prompt="consent")
        raise AssertionError(f"the provider never sent the person back: {self.visited[-6:]}")

    def sign_in(self, login: str, next_url: str = "") -> httpx2.Response:
        """The whole flow: BooCode's link, the provider's pages, the callback; BooCode's last answer."""
        return self.go(self.consent(self.authorization_url(next_url), login))

    def csrf_post(self, path: str, **form: str) -> httpx2.Response:
        """POST a form to BooCode as its pages do, with the CSRF cookie a page set (or one of
        its own: any 32 letters are a valid secret, and plain HTTP checks no Referer)."""
        token = next((c.value for c in self.http.cookies.jar if c.name == "csrftoken"), None)
        if token is None:
            token = "".join(secrets.choice(string.ascii_letters) for _ in range(32))
            self.http.cookies.set("csrftoken", token, domain=urlsplit(self.boocode_url).hostname or "")
        return self.http.post(f"{self.boocode_url}{path}", data={"csrfmiddlewaretoken": token, **form})
