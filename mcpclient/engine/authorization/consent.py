"""Who answers "send the person to this URL" and "wait for the code": nobody (a background session),
a headless fetch (servers that consent at once), or a person's browser, whose callback reaches the
waiting flow through :data:`PENDING` (this process only)."""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from mcp.shared.auth import (
    AuthorizationCodeResult,
)

from mcpclient.core.egress import Endpoint
from mcpclient.engine.authorization.failures import OAUTH_ERRORS, ConsentFailed, SignInRequired
from mcpclient.engine.inbound import document_client


class Consent:
    """Who answers "send the person to this URL" and "wait for the code"."""

    # The endpoints the administrator declared for the server signing in (set by HubOAuth): a
    # consent that fetches the authorization URL itself reaches them as declared.
    declared: frozenset[Endpoint] = frozenset()

    async def redirect(self, url: str) -> None:
        """Send the person to the authorization URL."""
        raise NotImplementedError

    async def callback(self) -> AuthorizationCodeResult:
        """The authorization response (code, state, iss)."""
        raise NotImplementedError


class NoConsent(Consent):
    """A background session: nobody to ask, so the server waits for someone to connect it."""

    def __init__(self, message: str) -> None:
        self.message = message

    async def redirect(self, url: str) -> None:
        raise SignInRequired(self.message)

    async def callback(self) -> AuthorizationCodeResult:  # pragma: no cover - redirect raised
        raise SignInRequired(self.message)


def _code_from_redirect(location: str) -> AuthorizationCodeResult:
    """The authorization response carried by a redirect URL (an error response raises)."""
    query = parse_qs(urlsplit(location).query)

    def first(key: str) -> str | None:
        values = query.get(key)
        return values[0] if values else None

    if first("error"):
        error = first("error")
        said = error if error in OAUTH_ERRORS else "an error"
        raise ConsentFailed(f"the authorization server answered {said}")
    code = first("code")
    if not code:
        raise ConsentFailed("the authorization response has no code")
    return AuthorizationCodeResult(code=code, state=first("state"), iss=first("iss"))


class HeadlessConsent(Consent):
    """Consent without a browser: fetch the authorization URL and read the code from its redirect.

    For authorization servers that consent at once (the conformance suite's, test servers);
    a server that shows a login page ends the flow with a clear error.
    """

    def __init__(self) -> None:
        self._result: AuthorizationCodeResult | None = None

    async def redirect(self, url: str) -> None:
        async with document_client(self.declared) as client:
            response = await client.get(url, follow_redirects=False)
        location = response.headers.get("location")
        if not response.is_redirect or not location:
            raise ConsentFailed(
                f"the authorization server answered HTTP {response.status_code} instead of redirecting back; "
                "this server needs a person to sign in in a browser"
            )
        self._result = _code_from_redirect(location)

    async def callback(self) -> AuthorizationCodeResult:
        if self._result is None:
            raise ConsentFailed("no authorization response")
        return self._result


# state -> the consent waiting for its callback (this process).
PENDING: dict[str, BrowserConsent] = {}


class BrowserConsent(Consent):
    """A person's browser: the URL is handed to whoever waits for it (the Connect view), the
    code arrives through BooCode's callback view (:func:`complete`)."""

    def __init__(self, *, server: str, user_id: int, owner_id: int | None) -> None:
        # ``user_id``: who started it (only they may complete it); ``owner_id``: whose
        # credential it is (None for a shared server).
        self.server = server
        self.user_id = user_id
        self.owner_id = owner_id
        loop = asyncio.get_running_loop()
        self.url: asyncio.Future[str] = loop.create_future()
        self._response: asyncio.Future[AuthorizationCodeResult] = loop.create_future()
        self.state = ""
        self.return_to = "/"  # where the person started (the callback sends them back)

    async def redirect(self, url: str) -> None:
        self.state = (parse_qs(urlsplit(url).query).get("state") or [""])[0]
        if not self.state:
            raise ConsentFailed("the authorization URL has no state")
        PENDING[self.state] = self
        if not self.url.done():
            self.url.set_result(url)

    async def callback(self) -> AuthorizationCodeResult:
        try:
            async with asyncio.timeout(settings.OAUTH_CONSENT_TIMEOUT):
                return await self._response
        except TimeoutError:
            raise ConsentFailed(
                f"nobody signed in within {settings.OAUTH_CONSENT_TIMEOUT:g} s "
                "(BOOCODE_OAUTH_CONSENT_TIMEOUT); connect again"
            ) from None
        finally:
            PENDING.pop(self.state, None)

    def fail(self, message: str) -> None:
        """End the wait with an error (the connection attempt was abandoned).

        Whoever waits gets it; a wait nobody started (the flow failed before its callback) is
        not an error to log, so each exception is marked as seen here.
        """
        for future in (self.url, self._response):
            if not future.done():
                future.set_exception(ConsentFailed(message))
                future.exception()

    def resolve(self, result: AuthorizationCodeResult | Exception) -> None:
        """Deliver the authorization response (or the provider's error) to the waiting flow."""
        if self._response.done():
            return
        if isinstance(result, Exception):
            self._response.set_exception(result)
        else:
            self._response.set_result(result)


class UnknownConsent(Exception):
    """A callback whose ``state`` matches no consent this person started in this process."""


def complete(state: str, user_id: int, query: dict[str, str]) -> BrowserConsent:
    """Hand an authorization response (the callback's query) to the flow that waits for it.

    Runs on the hub's loop. Only the person who started the flow may complete it: a callback
    link sent to somebody else (login CSRF) matches nothing.
    """
    consent = PENDING.get(state)
    if consent is None or consent.user_id != user_id:
        raise UnknownConsent("this sign-in link is unknown or expired; start again with Connect")
    if query.get("error"):
        description = query.get("error_description", "")
        consent.resolve(ConsentFailed(query["error"] + (f": {description}" if description else "")))
    elif not query.get("code"):
        consent.resolve(ConsentFailed("the authorization response has no code"))
    else:
        consent.resolve(AuthorizationCodeResult(code=query["code"], state=state, iss=query.get("iss")))
    return consent
