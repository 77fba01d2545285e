"""The egress policy: what BooCode fetches on a server's word reaches only where it may.

Real HTTP servers on loopback addresses (:class:`StubServer`, below): a declared MCP server whose
protected-resource metadata sends the sign-in elsewhere, and traps whose empty request lists
prove that nothing reached them; one serves TLS with a certificate made for the test. 127.0.0.2
stands for an internal host an administrator allows.
Two tests replace the system resolver (``socket.getaddrinfo``) for made-up names only: a name
whose answer changes between two lookups (DNS rebinding) or mixes a public and a private address
cannot be had from real DNS here; every other name is resolved for real.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import os
import re
import socket
import ssl
import subprocess
import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest
from cryptography import x509
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from boocode.chat.llm.client import LLMError, LLMSettings, fetch_models
from mcpclient.core import mcp_apps
from mcpclient.core.egress import EgressAllow, declared, refusal
from mcpclient.engine.authorization import ConsentFailed
from mcpclient.engine.egress import EgressRefused, EgressTransport, refused_origins
from mcpclient.engine.hub import Hub
from mcpclient.engine.inbound import KEEPALIVE, document_client
from tests.support.hubs import make_config
from tests.support.processes import PYTHON, ROOT

pytestmark = pytest.mark.django_db(transaction=True)

RULE = "(allow it with BOOCODE_EGRESS_ALLOW)"


# --- real servers on loopback addresses: fixed answers by path, every request seen ------------


@dataclass
class Answer:
    """What a path answers: a status, a body (a dict is sent as JSON), headers.

    ``chunks`` sends the body that many times over, with neither ``Content-Length`` nor an end
    but the closed connection (a reader learns its size only by reading).
    """

    status: int = 200
    body: bytes | str | dict[str, Any] = b""
    headers: dict[str, str] = field(default_factory=dict)
    chunks: int = 1


@dataclass(frozen=True)
class Seen:
    """A request the stub received."""

    method: str
    path: str
    host: str  # its Host header


class StubServer:
    """``ThreadingHTTPServer`` on ``host`` (an IPv4 address, a free port) answering :class:`Answer`
    by path (404 else), over TLS with ``tls`` (:func:`self_signed`)."""

    def __init__(
        self,
        routes: dict[str, Answer] | None = None,
        host: str = "127.0.0.1",
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.routes = dict(routes or {})
        self.requests: list[Seen] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                path = self.path.split("?", 1)[0]
                stub.requests.append(Seen(self.command, path, self.headers.get("Host", "")))
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                answer = stub.routes.get(path, Answer(404, b"not here"))
                body = answer.body
                if isinstance(body, dict):
                    body = json.dumps(body)
                data = body.encode() if isinstance(body, str) else body
                try:
                    self.send_response(answer.status)
                    for key, value in answer.headers.items():
                        self.send_header(key, value)
                    if isinstance(answer.body, dict) and "Content-Type" not in answer.headers:
                        self.send_header("Content-Type", "application/json")
                    if answer.chunks == 1:
                        self.send_header("Content-Length", str(len(data)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    for _ in range(answer.chunks):
                        self.wfile.write(data)
                except OSError:  # the client stopped reading (a refused body): nothing to tell
                    pass

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        self.host = host
        self.port = self._server.server_address[1]
        # shutdown() waits for the loop's next poll: a short one keeps a test's end quick.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        """``http://host:port`` (``https`` with TLS)."""
        return f"{self.scheme}://{self.host}:{self.port}"

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def self_signed(name: str, folder: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A certificate for the DNS name ``name`` only: the server's TLS context, a client's trusting it."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    return server, ssl.create_default_context(cafile=str(cert_file))


# --- the tests ------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def keys(settings: Any, tmp_path: Path) -> Any:
    settings.SECRETS_KEYS = [Fernet.generate_key().decode()]
    settings.SECRETS_KEY_FILE = tmp_path / "secrets.key"
    settings.PUBLIC_URL = "http://127.0.0.1:8000"
    settings.CLIENT_METADATA_URL = ""
    settings.EGRESS_ALLOW = EgressAllow()  # whatever the environment says: nothing beyond public
    return settings


def protected(authorization_server: str, metadata: Answer | None = None) -> StubServer:
    """A declared MCP server (``/mcp``) that asks for a sign-in at ``authorization_server``."""
    server = StubServer()
    document = f"{server.url}/.well-known/oauth-protected-resource"
    challenge = {"WWW-Authenticate": f'Bearer resource_metadata="{document}"'}
    server.routes = {
        "/mcp": Answer(401, {"error": "invalid_token"}, challenge),
        "/.well-known/oauth-protected-resource": metadata
        or Answer(200, {"resource": f"{server.url}/mcp", "authorization_servers": [authorization_server]}),
    }
    return server


def authorization_server(host: str, registration: Answer) -> StubServer:
    """An authorization server on ``host`` whose dynamic registration answers ``registration``."""
    server = StubServer(host=host)
    base = server.url
    server.routes = {
        "/.well-known/oauth-authorization-server": Answer(
            200,
            {
                "issuer": f"{base}/",
                "authorization_endpoint": f"{base}/authorize",
                "token_endpoint": f"{base}/token",
                "registration_endpoint": f"{base}/register",
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
            },
        ),
        "/register": registration,
    }
    return server


class Dialled:
    """httpcore's ``trace`` extension: the address each new connection of a request went to."""

    def __init__(self) -> None:
        self.addresses: list[tuple[str, int]] = []

    async def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            self.addresses.append(info["return_value"].get_extra_info("server_addr"))


async def sign_in_error(server: StubServer) -> str:
    """The error a hub records for the declared server ``server`` after its sign-in failed."""
    hub = Hub(base_dir=ROOT)
    try:
        await hub.start([make_config("hostile", {"type": "http", "url": f"{server.url}/mcp"})])
        return hub.snapshots()[0].last_error or ""
    finally:
        await hub.stop()


async def test_metadata_naming_a_loopback_authorization_server_is_refused_before_any_request() -> None:
    with StubServer() as trap, protected(f"{trap.url}/") as server:
        error = await sign_in_error(server)
    assert 'sign-in to MCP server "hostile" failed at discovery: ' in error
    assert (
        f"refused GET {trap.url}/.well-known/oauth-authorization-server: "
        f"127.0.0.1 is a loopback address {RULE}"
    ) in error
    assert trap.requests == []
    # The declared server itself is reached as declared, though it is on a loopback address.
    assert ("GET", "/.well-known/oauth-protected-resource") in [(r.method, r.path) for r in server.requests]


async def test_a_connect_click_reaches_no_internal_host_a_server_names() -> None:
    hub = Hub(base_dir=ROOT)
    with StubServer(host="127.0.0.2") as internal, protected(f"{internal.url}/") as server:
        entry = {"type": "http", "url": f"{server.url}/mcp", "oauth": {"mode": "perUser"}}
        try:
            await hub.start([make_config("hostile", entry)])
            connection, consent = await hub.authorize("hostile", user_id=1)
            await asyncio.wait_for(connection.wait_settled(), 10)
        finally:
            await hub.stop()
    assert isinstance(consent.url.exception(), ConsentFailed)  # no page to send the person to
    assert f"refused GET {internal.url}/.well-known/oauth-authorization-server" in connection.reason
    assert f"127.0.0.2 is a loopback address {RULE}" in connection.reason
    assert internal.requests == []


async def test_an_allowed_internal_server_is_reached_but_its_answer_is_not_shown(
    settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.EGRESS_ALLOW = EgressAllow.parse("127.0.0.2/32")
    banner = "db-primary.corp 10.9.8.7 build 4711"
    refused = Answer(400, {"error": "invalid_client_metadata", "error_description": banner, "note": banner})
    with authorization_server("127.0.0.2", refused) as internal, protected(f"{internal.url}/") as server:
        error = await sign_in_error(server)
    assert [(r.method, r.path) for r in internal.requests] == [
        ("GET", "/.well-known/oauth-authorization-server"),
        ("POST", "/register"),
    ]
    assert error.endswith(
        'sign-in to MCP server "hostile" failed at registration: '
        "the client registration failed (HTTP 400 invalid_client_metadata)"
    )
    assert banner not in error
    assert banner in caplog.text  # the description is for staff, in the log


@pytest.mark.parametrize("declared_size", [True, False], ids=["content-length", "streamed"])
async def test_an_oversized_metadata_document_is_refused_unread(declared_size: bool) -> None:
    piece = b" " * 65536
    huge = Answer(200, piece * 32) if declared_size else Answer(200, piece, chunks=32)
    with StubServer() as trap, protected(f"{trap.url}/", metadata=huge) as server:
        error = await sign_in_error(server)
    limit = "a document of 2.0 MB, over" if declared_size else "a document over"
    limit += " the 1.0 MB limit"
    assert error.endswith(f"failed at discovery: the answer of 127.0.0.1 was refused unread: {limit}")
    assert trap.requests == []


async def test_a_redirect_from_an_allowed_place_to_a_private_address_is_refused(settings: Any) -> None:
    settings.EGRESS_ALLOW = EgressAllow.parse("127.0.0.2")
    with StubServer() as trap, StubServer(host="127.0.0.2") as allowed:
        allowed.routes["/start"] = Answer(302, b"", {"Location": f"{trap.url}/secret"})
        async with document_client() as http:
            with pytest.raises(EgressRefused) as refused:
                await http.get(f"{allowed.url}/start", follow_redirects=True)
    assert str(refused.value) == f"refused GET {trap.url}/secret: 127.0.0.1 is a loopback address {RULE}"
    assert [r.path for r in allowed.requests] == ["/start"]
    assert trap.requests == []


async def test_the_connection_goes_to_the_checked_address_and_speaks_for_the_name(settings: Any) -> None:
    settings.EGRESS_ALLOW = EgressAllow.parse("127.0.0.1/32 ::1/128")  # the addresses, not the name
    dialled = Dialled()
    with StubServer({"/doc": Answer(200, {"ok": True})}) as server:
        async with document_client() as http:
            response = await http.get(f"http://localhost:{server.port}/doc", extensions={"trace": dialled})
    assert response.json() == {"ok": True}
    assert server.requests[0].host == f"localhost:{server.port}"  # the Host header is the name's
    assert dialled.addresses == [("127.0.0.1", server.port)]


async def test_tls_is_verified_for_the_name_at_the_pinned_address(settings: Any, tmp_path: Path) -> None:
    settings.EGRESS_ALLOW = EgressAllow.parse("127.0.0.1/32 ::1/128")
    server_tls, trusting = self_signed("localhost", tmp_path)
    dialled = Dialled()
    with StubServer({"/doc": Answer(200, {"ok": True})}, tls=server_tls) as server:
        transport = EgressTransport(limits=KEEPALIVE, verify=trusting)
        async with httpx2.AsyncClient(transport=transport) as http:
            response = await http.get(f"https://localhost:{server.port}/doc", extensions={"trace": dialled})
            assert response.json() == {"ok": True}
            assert dialled.addresses == [("127.0.0.1", server.port)]
            # The same server by its address: allowed, dialled, and refused by TLS, for the
            # certificate names localhost. The name checked is the one asked for, not the address.
            with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await http.get(f"https://127.0.0.1:{server.port}/doc")
    assert [r.host for r in server.requests] == [f"localhost:{server.port}"]


class Resolver:
    """The system resolver, but made-up names answer ``answers[name]``: one list of addresses per
    lookup in turn (the last one repeats); ``lookups`` counts them."""

    def __init__(self) -> None:
        self.answers: dict[str, list[list[str]]] = {}
        self.lookups: Counter[str] = Counter()
        self._real = socket.getaddrinfo

    def getaddrinfo(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in self.answers:
            return self._real(host, port, *args, **kwargs)
        turns = self.answers[name]
        addresses = turns[min(self.lookups[name], len(turns) - 1)]
        self.lookups[name] += 1
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port))) for address in addresses]


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Resolver:
    """Made-up names for this test (see :class:`Resolver`); every other name resolves for real."""
    fake = Resolver()
    monkeypatch.setattr(socket, "getaddrinfo", fake.getaddrinfo)
    return fake


async def test_a_name_that_changes_its_answer_is_dialled_at_the_checked_address(
    settings: Any, resolver: Resolver
) -> None:
    settings.EGRESS_ALLOW = EgressAllow.parse("127.0.0.1/32")
    resolver.answers["rebind.test"] = [["127.0.0.1"], ["10.255.255.1"]]  # checked first, private after
    with StubServer({"/doc": Answer(200, {"ok": True})}) as server:
        url = f"http://rebind.test:{server.port}/doc"
        dialled = Dialled()
        async with document_client() as http:
            response = await http.get(url, extensions={"trace": dialled})
        # One lookup, and the connection went to its answer: nothing resolved the name again.
        assert response.json() == {"ok": True}
        assert resolver.lookups["rebind.test"] == 1
        assert dialled.addresses == [("127.0.0.1", server.port)]
        assert server.requests[0].host == f"rebind.test:{server.port}"
        # A new connection is checked again, against the name's new answer.
        async with document_client() as http:
            with pytest.raises(EgressRefused) as refused:
                await http.get(url)
    assert f"{url}: rebind.test resolves to 10.255.255.1, a private address {RULE}" in str(refused.value)
    assert len(server.requests) == 1


async def test_a_name_with_one_private_address_among_public_ones_is_refused(resolver: Resolver) -> None:
    resolver.answers["mixed.test"] = [["93.184.215.14", "127.0.0.1"]]
    async with document_client() as http:
        with pytest.raises(EgressRefused) as refused:
            await http.get("https://mixed.test/.well-known/openid-configuration")
    assert "mixed.test resolves to 127.0.0.1, a loopback address" in str(refused.value)


def test_the_rules_name_what_they_refuse() -> None:
    nothing = EgressAllow()
    cases = {
        "169.254.169.254": "169.254.169.254 is the cloud metadata address",
        "fd00:ec2::254": "fd00:ec2::254 is the cloud metadata address",
        "10.1.2.3": "10.1.2.3 is a private address",
        "::ffff:10.1.2.3": "::ffff:10.1.2.3 is an IPv6 form of 10.1.2.3, a private address",
        "64:ff9b::7f00:1": "64:ff9b::7f00:1 is an IPv6 form of 127.0.0.1, a loopback address",
        "169.254.1.1": "169.254.1.1 is a link-local address",
        "0.0.0.0": "0.0.0.0 is an unspecified address",
        "224.0.0.1": "224.0.0.1 is a multicast address",
        "100.64.0.1": "100.64.0.1 is an address that is not public",
    }
    for host, reason in cases.items():
        assert refusal(host, 443, [ipaddress.ip_address(host)], nothing) == f"{reason} {RULE}"
    assert refusal("example.com", 443, [ipaddress.ip_address("93.184.215.14")], nothing) is None


def test_the_setting_allows_networks_and_names_and_declared_servers_stay_reachable() -> None:
    loopback = [ipaddress.ip_address("127.0.0.1")]
    private = [ipaddress.ip_address("10.20.30.40")]
    allow = EgressAllow.parse("10.0.0.0/8, auth.corp.example  *.internal.example")
    assert refusal("db.example", 443, private, allow) is None  # by network
    assert refusal("auth.corp.example", 443, loopback, allow) is None  # by name
    assert refusal("idp.internal.example", 443, loopback, allow) is None  # under a listed name
    assert refusal("internal.example", 443, loopback, allow) is not None
    assert refusal("other.example", 443, loopback, allow) is not None
    # A server declared in mcp.json is reached at its own host and port, not at another port.
    own = declared("http://127.0.0.1:8123/mcp")
    assert refusal("127.0.0.1", 8123, loopback, EgressAllow(), own) is None
    assert refusal("127.0.0.1", 6379, loopback, EgressAllow(), own) is not None
    assert declared("http://mcp.corp/mcp") == {("mcp.corp", 80), ("mcp.corp", 443)}  # the https upgrade


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("10.0.0.1/8", "'10.0.0.1/8' is not a network: 10.0.0.1/8 has host bits set"),
        ("https://auth.corp", "'https://auth.corp' is neither a network in CIDR notation"),
        ("auth.corp:8443", "'auth.corp:8443' is neither a network in CIDR notation"),
        ("10.0.0.256", "'10.0.0.256' is not a network"),
    ],
)
def test_a_bad_item_is_named(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        EgressAllow.parse(f"127.0.0.1 {value}")


@pytest.mark.processes
def test_a_bad_setting_stops_the_process_naming_the_item(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "BOOCODE_DATA_DIR": str(tmp_path),
        "BOOCODE_EGRESS_ALLOW": "10.0.0.0/8 https://auth.corp",
    }
    result = subprocess.run([PYTHON, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "BOOCODE_EGRESS_ALLOW: 'https://auth.corp' is neither a network in CIDR notation" in result.stderr


async def test_a_view_gets_no_private_origin_into_its_policy(settings: Any) -> None:
    settings.EGRESS_ALLOW = EgressAllow.parse("10.1.0.0/16")
    declared_by_view = {
        "connectDomains": [
            "http://127.0.0.1:8123",  # its own server, as declared
            "http://127.0.0.1:6379",
            "http://169.254.169.254",
            "https://10.1.2.3",  # allowed
            "https://10.2.0.1",
            "http://localhost:3000",
            "https://api.clock.example",  # does not resolve here: left to the browser
        ],
        "resourceDomains": ["https://*.localhost", "https://93.184.215.14"],
    }
    policy = mcp_apps.view_policy({"ui": {"csp": declared_by_view}})
    refused = await refused_origins(policy.origins(), declared("http://127.0.0.1:8123/mcp"))
    kept = policy.without(refused)
    assert kept.domains == {
        "connectDomains": ("http://127.0.0.1:8123", "https://10.1.2.3", "https://api.clock.example"),
        "resourceDomains": ("https://93.184.215.14",),
    }
    assert "http://169.254.169.254 left out: 169.254.169.254 is the cloud metadata address" in kept.note
    assert "connect-src http://127.0.0.1:8123 https://10.1.2.3 https://api.clock.example;" in (
        kept.content_security_policy()
    )


async def test_the_model_servers_redirect_is_not_followed() -> None:
    with StubServer() as trap, StubServer() as model:
        model.routes["/v1/models"] = Answer(302, b"", {"Location": f"{trap.url}/v1/models"})
        with pytest.raises(LLMError) as failed:
            await fetch_models(LLMSettings(base_url=f"{model.url}/v1", model="m", timeout=5, max_retries=0))
    assert f"redirects (HTTP 302) to {trap.url}/v1/models" in str(failed.value)
    assert "set BOOCODE_LLM_BASE_URL to where it leads" in str(failed.value)
    assert trap.requests == []
