"""Values of ``${input:ID}`` placeholders (VS Code's ``inputs``), kept out of mcp.json.

An entry copied from VS Code may say ``"Authorization": "Bearer ${input:github-token}"``.
VS Code prompts for the value; BooCode looks it up, when the server connects, in:

1. the environment variable ``BOOCODE_INPUT_<ID>`` (:func:`env_name`: the ID upper-cased, every
   character outside A-Z and 0-9 turned into ``_``), when it is set and not empty;
2. the secret store (:mod:`mcpclient.secrets.store`, kind ``"input"``), where the admin puts the
   values staff enter on a server's "inputs" page.

The hub passes :func:`input_value` to the config resolver, which reports an input that has no
value. The admin uses :func:`input_statuses` and :func:`update_inputs`, then reconnects the
servers that use a changed input (:func:`mcpclient.admin.changes.reconnect_servers_using`). Values
are never logged, rendered or written to mcp.json.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from mcpclient.config.entries import inputs_used
from mcpclient.config.resolve import env_name
from mcpclient.secrets import store

INPUT_KIND = "input"
# Bounds what one form post can put in the store; real tokens are far shorter.
MAX_VALUE_CHARS = 16_384


class InputError(ValueError):
    """A change to input values was refused; nothing was changed."""


def input_value(input_id: str) -> str | None:
    """The value of ``${input:<input_id>}``: the environment, else the secret store, else None.

    Raises :class:`~mcpclient.secrets.store.SecretStoreError` when a stored value cannot be
    decrypted (wrong or missing key). Reads the database: call it from sync code.
    """
    from_env = os.environ.get(env_name(input_id))
    if from_env:  # empty counts as unset: compose files pass "X=" for variables nobody set
        return from_env
    return store.get_secret(INPUT_KIND, input_id)


def set_input(input_id: str, value: str) -> None:
    """Store ``value`` for ``${input:<input_id>}`` in the secret store (encrypted)."""
    store.put_secret(INPUT_KIND, input_id, value)


def clear_input(input_id: str) -> bool:
    """Remove the stored value of ``${input:<input_id>}``; True if there was one."""
    return store.delete_secret(INPUT_KIND, input_id)


def input_ids(entry: object) -> list[str]:
    """The IDs of every ``${input:ID}`` in an mcp.json entry (its strings, at any depth), in order.

    The config loader's own scan, so the admin lists exactly the placeholders that get expanded.
    """
    return inputs_used(entry)


class InputState(StrEnum):
    """Where an input's value comes from, as the admin shows it."""

    ENVIRONMENT = "environment"
    STORED = "stored"
    UNREADABLE = "unreadable"
    MISSING = "missing"


@dataclass(frozen=True)
class InputStatus:
    """One input of a server and where its value comes from (never the value)."""

    input_id: str
    env_name: str
    state: InputState
    stored: bool  # a value is in the store (it may be shadowed by the environment)
    detail: str


def input_statuses(ids: Iterable[str]) -> list[InputStatus]:
    """Where the value of each input comes from: the environment, the store, or nowhere."""
    stored_ids = set(store.secret_names(INPUT_KIND))
    statuses = []
    for input_id in ids:
        variable = env_name(input_id)
        stored = input_id in stored_ids
        if os.environ.get(variable):
            state, detail = InputState.ENVIRONMENT, f"set in the environment as {variable}"
            if stored:
                detail += " (a stored value exists; the environment wins)"
        elif stored:
            try:
                store.get_secret(INPUT_KIND, input_id)  # decrypted to check the key, never shown
                state, detail = InputState.STORED, "stored (encrypted)"
            except store.SecretStoreError as exc:
                state, detail = InputState.UNREADABLE, str(exc)
        else:
            state, detail = InputState.MISSING, f"missing: enter a value or set {variable}"
        statuses.append(InputStatus(input_id, variable, state, stored, detail))
    return statuses


@dataclass
class InputUpdate:
    """What :func:`update_inputs` changed."""

    stored: list[str]
    cleared: list[str]

    @property
    def changed(self) -> list[str]:
        """Every input whose stored value changed."""
        return [*self.stored, *self.cleared]


def update_inputs(
    *, allowed: Collection[str], values: Mapping[str, str], clear: Collection[str]
) -> InputUpdate:
    """Store the non-empty ``values`` and delete the inputs in ``clear``, for inputs in ``allowed``.

    ``allowed`` is the inputs of the server being edited: anything else is refused, so a form
    cannot write arbitrary names into the store. An empty value means "leave it as it is".
    Raises :class:`InputError` (nothing changed) for an unknown input, a value given together
    with "clear", or a value over :data:`MAX_VALUE_CHARS`.
    """
    given = {input_id: value for input_id, value in values.items() if value}
    for input_id in [*given, *clear]:
        if input_id not in allowed:
            raise InputError(f'"{input_id}" is not an input of this server')
    for input_id, value in given.items():
        if input_id in clear:
            raise InputError(f'input "{input_id}": enter a value or tick "clear", not both')
        if len(value) > MAX_VALUE_CHARS:
            raise InputError(f'input "{input_id}": the value is longer than {MAX_VALUE_CHARS} characters')
    update = InputUpdate(stored=[], cleared=[])
    for input_id, value in given.items():
        set_input(input_id, value)
        update.stored.append(input_id)
    for input_id in clear:
        if clear_input(input_id):
            update.cleared.append(input_id)
    return update
