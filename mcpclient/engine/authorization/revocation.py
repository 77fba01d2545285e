"""Disconnecting: revoke the stored tokens where the provider supports it (RFC 7009), then forget them."""

from __future__ import annotations

import base64

import httpx2

from mcpclient.core import egress
from mcpclient.engine.authorization.storage import CredentialStore
from mcpclient.engine.inbound import document_client


async def revoke(store: CredentialStore) -> str:
    """Revoke the stored tokens where the provider supports it (RFC 7009), then forget them.

    Returns what happened, for the person who disconnected. The credential is deleted even when
    revocation fails: disconnecting must never leave tokens behind in BooCode.
    """
    tokens = await store.get_tokens()
    client = await store.get_client_info()
    _, asm = await store.metadata()
    await store.delete()
    if tokens is None:
        return "nothing was stored"
    if asm is None or asm.revocation_endpoint is None or client is None:
        return "tokens deleted; the provider offers no revocation, revoke access in its settings if needed"
    data: dict[str, str] = {"client_id": client.client_id}
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if client.client_secret and client.token_endpoint_auth_method == "client_secret_basic":
        pair = f"{client.client_id}:{client.client_secret}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        data.pop("client_id")
    elif client.client_secret:
        data["client_secret"] = client.client_secret
    failures = []
    async with document_client(egress.declared(store.url)) as http:
        for hint, token in (("refresh_token", tokens.refresh_token), ("access_token", tokens.access_token)):
            if not token:
                continue
            try:
                response = await http.post(
                    str(asm.revocation_endpoint),
                    data={**data, "token": token, "token_type_hint": hint},
                    headers=headers,
                )
            except httpx2.HTTPError as exc:
                failures.append(f"{hint}: {type(exc).__name__}")
                continue
            if response.status_code != 200:
                failures.append(f"{hint}: HTTP {response.status_code}")
    if failures:
        return "tokens deleted; revocation failed (" + ", ".join(failures) + ")"
    return "tokens revoked and deleted"
