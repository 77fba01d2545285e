"""An HTTP client for a live server that is not a browser: cookies, CSRF, a chosen source address."""

from __future__ import annotations

import http.client
import secrets
import string
from dataclasses import dataclass, field
from urllib.parse import urlencode

from tests.support.live import PASSWORD


@dataclass
class Response:
    status: int
    headers: http.client.HTTPMessage
    body: str


@dataclass
class Browserless:
    """An HTTP client for the live server: keeps cookies, fills in CSRF, picks its source address.

    Linux routes all of 127.0.0.0/8 locally, so each ``source`` address is a different client
    to the server.
    """

    port: int
    source: str = "127.0.0.1"
    headers: dict[str, str] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Any 32-letter secret is a valid CSRF cookie; the form sends it back (plain HTTP: no Referer check).
        self.csrf = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(32))
        self.cookies.setdefault("csrftoken", self.csrf)

    def request(
        self,
        method: str,
        path: str,
        form: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        connection = http.client.HTTPConnection(
            "127.0.0.1", self.port, timeout=10, source_address=(self.source, 0)
        )
        sent = {**self.headers, **(headers or {})}
        sent["Cookie"] = "; ".join(f"{name}={value}" for name, value in self.cookies.items())
        body = None
        if form is not None:
            body = urlencode({"csrfmiddlewaretoken": self.csrf, **form})
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.request(method, path, body=body, headers=sent)
            reply = connection.getresponse()
            text = reply.read().decode("utf-8", "replace")
        finally:
            connection.close()
        for cookie in reply.headers.get_all("Set-Cookie") or []:
            name, _, rest = cookie.partition("=")
            value = rest.split(";", 1)[0]
            if value in ("", '""'):
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = value
        return Response(reply.status, reply.headers, text)

    def log_in(self, username: str, password: str = PASSWORD) -> Response:
        return self.request("POST", "/login/", {"username": username, "password": password})
