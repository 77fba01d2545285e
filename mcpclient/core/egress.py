"""The egress policy: which addresses BooCode may connect to on a server's or a model's word.

A request whose address comes from what a server sent (OAuth metadata and the endpoints it
names, a redirect, a view's declared domains) may reach only public addresses. Private,
loopback, link-local, multicast, reserved and unspecified addresses, the cloud metadata
addresses and IPv6 forms that carry such an IPv4 address are refused, unless:

* ``BOOCODE_EGRESS_ALLOW`` allows them (:class:`EgressAllow`: networks in CIDR notation, and host
  names, whose every address is then allowed; ``*.corp.example`` allows the names under it), or
* the host and port are *declared*: the ``url`` of a server in mcp.json (its own host and port,
  and port 443 of an ``http://`` URL on port 80, the upgrade MCP transports follow), or another
  endpoint the administrator wrote there (an identity provider's token endpoint).

Values only: resolving names and connecting to the checked address are
:mod:`mcpclient.engine.egress`'s. A host is refused when *any* of its addresses is, so a name
cannot pass with one public address and be reached at another.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

SETTING = "BOOCODE_EGRESS_ALLOW"

# What a person reads when their own server (mcpclient.runtime.personal) is refused: the setting
# that would change it is the operator's, not theirs, so it is named in the log and the admin only.
OWN_SERVER_REFUSED = (
    "This BooCode does not let servers of one's own reach addresses on this machine or its "
    "private network; ask an administrator."
)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# A host (lower case, IDNA-encoded, no trailing dot) and a port.
Endpoint = tuple[str, int]

METADATA_ADDRESSES = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LABEL = r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?"
_HOST_NAME = re.compile(rf"(\*\.)?{_LABEL}(\.{_LABEL})*")
_NETWORK_LIKE = re.compile(r"[0-9a-fA-F.:/]+")
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def normalize_host(host: str) -> str:
    """``host`` as connections name it: lower case, IDNA-encoded, without a trailing dot."""
    host = host.strip().rstrip(".").lower()
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def endpoint(url: str) -> Endpoint | None:
    """The host and port ``url`` connects to (None when it names no host or an unknown scheme)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if not parts.hostname or scheme not in _DEFAULT_PORTS:
        return None
    return normalize_host(parts.hostname), port or _DEFAULT_PORTS[scheme]


def declared(*urls: str | None) -> frozenset[Endpoint]:
    """The endpoints the administrator declared with ``urls`` (see the module docstring)."""
    found: set[Endpoint] = set()
    for url in urls:
        point = endpoint(url or "")
        if point is None:
            continue
        found.add(point)
        if urlsplit(url or "").scheme.lower() == "http" and point[1] == 80:
            found.add((point[0], 443))
    return frozenset(found)


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, 6to4 or NAT64), else None."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_kind(address: IPAddress) -> str | None:
    """Why ``address`` is not a public one ("a loopback address", ...); None when it is."""
    if address in METADATA_ADDRESSES:
        return "the cloud metadata address"
    inner = _embedded_ipv4(address)
    if inner is not None:
        kind = address_kind(inner)
        return f"an IPv6 form of {inner}, {kind}" if kind else None
    checks = (
        (address.is_unspecified, "an unspecified address"),
        (address.is_loopback, "a loopback address"),
        (address.is_link_local, "a link-local address"),
        (address.is_multicast, "a multicast address"),
        (address.is_private, "a private address"),
        (address.is_reserved, "a reserved address"),
        (not address.is_global, "an address that is not public"),
    )
    return next((kind for found, kind in checks if found), None)


@dataclass(frozen=True)
class EgressAllow:
    """What ``BOOCODE_EGRESS_ALLOW`` allows beyond public addresses: networks and host names."""

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str) -> EgressAllow:
        """Comma- or space-separated CIDRs (a bare address is one address) and host names.

        Raises ``ValueError`` naming the first item that is neither.
        """
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for item in text.replace(",", " ").split():
            try:
                networks.append(ipaddress.ip_network(item))
                continue
            except ValueError as exc:
                problem = str(exc)
            name = normalize_host(item)
            if _HOST_NAME.fullmatch(name) and not name.replace(".", "").isdigit():
                hosts.add(name)
            elif _NETWORK_LIKE.fullmatch(item):
                raise ValueError(f"{item!r} is not a network: {problem}")
            else:
                raise ValueError(
                    f"{item!r} is neither a network in CIDR notation (10.0.0.0/8, fd00::/8) "
                    "nor a host name (auth.corp.example, *.corp.example)"
                )
        return cls(networks=tuple(networks), hosts=frozenset(hosts))

    def allows_host(self, host: str) -> bool:
        """Whether ``host`` (normalized) is listed, itself or under a listed ``*.`` name."""
        if host in self.hosts:
            return True
        return any(name.startswith("*.") and host.endswith(name[1:]) for name in self.hosts)

    def allows_address(self, address: IPAddress) -> bool:
        """Whether ``address`` (or the IPv4 address it carries) is in a listed network."""
        candidates = [address, *filter(None, [_embedded_ipv4(address)])]
        return any(
            candidate.version == network.version and candidate in network
            for candidate in candidates
            for network in self.networks
        )


def named_allowed(host: str, port: int, allow: EgressAllow, declared: Collection[Endpoint] = ()) -> bool:
    """Whether ``host``:``port`` is allowed whatever it resolves to: declared, or a host the setting names."""
    name = normalize_host(host)
    return (name, port) in declared or allow.allows_host(name)


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def refusal(
    host: str,
    port: int,
    addresses: Iterable[IPAddress],
    allow: EgressAllow,
    declared: Collection[Endpoint] = (),
) -> str | None:
    """The rule that refuses connecting to ``host``:``port`` at ``addresses``; None if nothing does.

    ``host`` as the request names it (normalized here); ``addresses`` all that it resolves to.
    """
    if named_allowed(host, port, allow, declared):
        return None
    name = normalize_host(host)
    for address in addresses:
        kind = address_kind(address)
        if kind is None or allow.allows_address(address):
            continue
        where = f"{host} is {kind}" if _is_address(name) else f"{host} resolves to {address}, {kind}"
        return f"{where} (allow it with {SETTING})"
    return None
