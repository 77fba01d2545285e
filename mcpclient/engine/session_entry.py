"""The entry a connection attempt opens: its placeholders expanded for whose session it is.

A person's own process of a ``"scope": "perUser"`` server gets their ``${user.id}`` and
``${user.name}`` (the name read where the hub was told to read it: the database); ``${input:}``
values may come from the secret store. Either way the ORM runs in the database thread.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from channels.db import database_sync_to_async

from mcpclient.config.entries import inputs_used
from mcpclient.config.model import Person, ResolvedServer, ServerConfig, per_user_process, person_slug
from mcpclient.config.resolve import InputLookup, resolve_server


async def resolve_entry(
    config: ServerConfig,
    *,
    owner_id: int | None,
    person_name: Callable[[int], str] | None,
    base_dir: Path,
    allowed_commands: list[str] | None,
    input_value: InputLookup | None,
) -> ResolvedServer:
    """The entry with its placeholders expanded (see :func:`~mcpclient.config.resolve.resolve_server`)."""
    owner, lookup = owner_id, person_name
    person_wanted = owner is not None and per_user_process(config)

    def resolve() -> ResolvedServer:
        person = None
        if person_wanted and owner is not None:
            name = lookup(owner) if lookup is not None else ""
            person = Person(owner, person_slug(name, owner))
        return resolve_server(
            config,
            base_dir=base_dir,
            allowed_commands=allowed_commands,
            input_value=input_value,
            person=person,
        )

    if inputs_used(config.raw) or (person_wanted and lookup is not None):
        # ${input:} values may come from the secret store: the ORM runs in the database thread.
        return await database_sync_to_async(resolve)()
    return resolve()
