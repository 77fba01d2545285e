"""Where credentials live: one encrypted secret-store record per server (or per server and person),
read and written as the SDK's ``TokenStorage``. Nothing of a credential is logged."""

from __future__ import annotations

import json
import time
from typing import Any

from channels.db import database_sync_to_async
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from pydantic import ValidationError

from mcpclient.secrets import store as secret_store

SECRET_KIND = "oauth"


def credential_name(server: str, user_id: int | None, *, own: bool = False) -> str:
    """The secret store name of a credential: the server's, one person's for a shared "perUser"
    server (``name@user:<id>``), or one person's for a server of their own (``own``:
    ``name@own:<id>``). A server's name has no "@", so the three never meet: a person's own server
    never reads the tokens of a shared server of the same name hidden from them."""
    if user_id is None:
        return server
    return f"{server}@{'own' if own else 'user'}:{user_id}"


def signed_in_servers(user_id: int | None, *, own: bool = False) -> set[str]:
    """The servers with a stored credential of ``user_id`` (``None``: the shared ones; ``own``:
    of the person's own servers). Sync ORM."""
    names = secret_store.secret_names(SECRET_KIND)
    if user_id is None:
        return {name for name in names if "@" not in name}
    suffix = credential_name("", user_id, own=own)
    return {name.removesuffix(suffix) for name in names if name.endswith(suffix)}


class CredentialStore:
    """The SDK's ``TokenStorage`` over the secret store, for one (server, person).

    One encrypted JSON record: ``url`` (credentials are dropped when the entry's URL changes),
    ``tokens``, ``expires_at`` (epoch seconds), ``client`` (the registration), ``issuer``,
    ``prm`` and ``asm`` (discovered metadata, so a refresh after a restart goes to the right
    token endpoint). A pre-registered client from the entry always wins over a stored one.
    """

    def __init__(
        self,
        server: str,
        user_id: int | None,
        url: str,
        preregistered: OAuthClientInformationFull | None = None,
        *,
        own: bool = False,
    ) -> None:
        self.server = server
        self.user_id = user_id
        self.own = own  # a server of the person's own (its record: credential_name's own form)
        self.url = url
        self.preregistered = preregistered
        self._record: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        """The record's name in the secret store."""
        return credential_name(self.server, self.user_id, own=self.own)

    async def _load(self) -> dict[str, Any]:
        if self._record is None:
            text = await database_sync_to_async(secret_store.get_secret)(SECRET_KIND, self.name)
            record = json.loads(text) if text else {}
            self._record = record if record.get("url") == self.url else {"url": self.url}
        return self._record

    async def _save(self) -> None:
        record = await self._load()
        await database_sync_to_async(secret_store.put_secret)(SECRET_KIND, self.name, json.dumps(record))

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens, if any."""
        tokens = (await self._load()).get("tokens")
        return OAuthToken.model_validate(tokens) if tokens else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Keep new tokens (and when they expire)."""
        record = await self._load()
        record["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        record["expires_at"] = time.time() + int(tokens.expires_in) if tokens.expires_in is not None else None
        await self._save()

    async def expires_at(self) -> float | None:
        """When the stored access token expires (epoch seconds), if the server said."""
        return (await self._load()).get("expires_at")

    async def clear_tokens(self) -> None:
        """Forget the tokens (a refused refresh), keeping the registration."""
        record = await self._load()
        if record.pop("tokens", None) is not None:
            record.pop("expires_at", None)
            await self._save()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The pre-registered client, else the stored registration."""
        if self.preregistered is not None:
            return self.preregistered
        client = (await self._load()).get("client")
        return OAuthClientInformationFull.model_validate(client) if client else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Keep a registration (dynamic or CIMD)."""
        record = await self._load()
        record["client"] = client_info.model_dump(mode="json", exclude_none=True)
        await self._save()

    async def metadata(self) -> tuple[ProtectedResourceMetadata | None, OAuthMetadata | None]:
        """The metadata discovered at the last sign-in."""
        record = await self._load()
        prm, asm = record.get("prm"), record.get("asm")
        try:
            return (
                ProtectedResourceMetadata.model_validate(prm) if prm else None,
                OAuthMetadata.model_validate(asm) if asm else None,
            )
        except ValidationError:
            return None, None

    async def set_metadata(self, prm: ProtectedResourceMetadata | None, asm: OAuthMetadata | None) -> None:
        """Keep the metadata a sign-in used."""
        record = await self._load()
        record["prm"] = prm.model_dump(mode="json", exclude_none=True) if prm else None
        record["asm"] = asm.model_dump(mode="json", exclude_none=True) if asm else None
        await self._save()

    async def delete(self) -> None:
        """Forget everything (disconnect)."""
        self._record = {"url": self.url}
        await database_sync_to_async(secret_store.delete_secret)(SECRET_KIND, self.name)
