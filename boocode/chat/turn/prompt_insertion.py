"""Prompts in the conversation: the ``prompt`` frame, the ``/`` menu's list, and the insertion.

The chat's side of MCP prompts (listing and getting them: :mod:`mcpclient.engine.prompts`).
A person picks a prompt in the page's ``/`` menu (``GET /api/prompts``), fills in its
arguments, and the page sends a ``prompt`` frame ``{server, name, arguments}``. The consumer
checks it here (:func:`checked_frame`: types, sizes, and that the prompt is one the person may
use now, with the arguments it takes) and starts a turn of kind ``prompt``. The turn calls
:func:`insert_prompt`: ``prompts/get`` through the hub (the person's own session for a "perUser"
server), then one write stores a console row marking where the messages came from ("from
prompt <server>/<name>" and the arguments) and the prompt's messages with their roles, in
order, and the turn announces them. It then answers the conversation as after a user message:
the model's request holds the inserted messages in order (console rows are never sent to the
model).

A prompt that cannot be got (unknown, bad arguments, server down, server error) stores
nothing; :func:`insert_prompt` says why, the turn stores a notice with the reason and ends
``failed`` with it.

Which prompts a person may use: every prompt of the shared servers that are ready, and of
their own sessions with "perUser" servers. Prompts are user-controlled content (the MCP spec):
they give the model no capability, so the agent's tool patterns, which bound what the model
may call, do not filter them.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async
from django.conf import settings

from boocode.chat.storable import text_problem
from boocode.chat.turn.conversations import store_prompt
from mcpclient.core import prompts as hub_prompts
from mcpclient.runtime import TURN_CHECK_INTERVAL, get_hub
from mcpclient.runtime.signin import person_hub

if TYPE_CHECKING:
    from mcpclient.engine.api import HubApi

logger = logging.getLogger(__name__)

MAX_NAME_CHARS = hub_prompts.MAX_NAME_CHARS  # of a server's or a prompt's name in a frame
MAX_ARGUMENTS = hub_prompts.MAX_ARGUMENTS
MAX_ARGUMENT_CHARS = 32_000  # of one argument's value (a message's limit)

# The console commands, as the "/" menu offers them (boocode.chat.turn.console runs them).
CONSOLE_COMMANDS = (
    {
        "name": "/tools",
        "insert": "/tools",
        "description": "List the tools this conversation's agent may use.",
    },
    {
        "name": "/call",
        "insert": "/call ",
        "description": 'Run one tool and show its result: /call <tool> {"argument": "value"}',
    },
    {
        "name": "/compact",
        "insert": "/compact",
        "description": "Summarise the earlier messages for the model; the page keeps them all.",
    },
    {"name": "/help", "insert": "/help", "description": "Show the tool console's help."},
)


class BadPrompt(Exception):
    """A ``prompt`` frame that cannot be run; ``code`` and ``str()`` go into the error frame."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class PromptRequest:
    """A checked ``prompt`` frame: which prompt of which server, with which arguments."""

    server: str
    name: str
    arguments: tuple[tuple[str, str], ...] = ()

    @property
    def argument_dict(self) -> dict[str, str]:
        """The arguments as ``prompts/get`` takes them."""
        return dict(self.arguments)


def _name(content: dict[str, Any], key: str) -> str:
    value = content.get(key)
    if not isinstance(value, str) or not value.strip():
        raise BadPrompt("bad_frame", f'prompt needs a non-empty string "{key}".')
    if len(value) > MAX_NAME_CHARS:
        raise BadPrompt("bad_frame", f'prompt "{key}" is limited to {MAX_NAME_CHARS} characters.')
    return value


def checked_frame(content: dict[str, Any], hub: HubApi | None, user_id: int | None) -> PromptRequest:
    """The ``prompt`` frame as a request, or :class:`BadPrompt` naming what is wrong.

    The prompt must be listed now for ``user_id`` (shared servers, their own sessions) and the
    arguments must be the ones it takes, the required ones not blank.
    """
    server, name = _name(content, "server"), _name(content, "name")
    raw = content.get("arguments", {})
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise BadPrompt("bad_frame", 'prompt "arguments" must be an object of strings.')
    if len(raw) > MAX_ARGUMENTS:
        raise BadPrompt("bad_frame", f"A prompt takes at most {MAX_ARGUMENTS} arguments.")
    arguments: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(value, str):
            raise BadPrompt("bad_frame", f'prompt argument "{key[:MAX_NAME_CHARS]}" must be a string.')
        if len(key) > MAX_NAME_CHARS or len(value) > MAX_ARGUMENT_CHARS:
            raise BadPrompt("too_long", f"Prompt arguments are limited to {MAX_ARGUMENT_CHARS} characters.")
        problem = text_problem(value, f'argument "{key}"') if value else None
        if problem is not None:
            raise BadPrompt("bad_text", problem)
        arguments[key] = value
    prompt = hub.prompt(server, name, user_id) if hub is not None else None
    if prompt is None:
        raise BadPrompt(
            "unknown_prompt", f'No prompt "{name}" of MCP server "{server}" is available to you now.'
        )
    problem = hub_prompts.argument_problem(prompt, arguments)
    if problem is not None:
        raise BadPrompt("bad_arguments", problem)
    # Optional arguments left blank are not sent: the server's default applies.
    kept = tuple((key, value) for key, value in arguments.items() if value.strip() or _required(prompt, key))
    return PromptRequest(server=server, name=name, arguments=kept)


def _required(prompt: hub_prompts.HubPrompt, key: str) -> bool:
    return any(argument.name == key and argument.required for argument in prompt.arguments)


# Seconds a ready server's first prompt listing may take before the menu answers without it (a
# server is ready once its tools are listed; its prompts may still be on their way).
LISTING_WAIT = 5.0


async def running_hub(user_id: int | None) -> HubApi | None:
    """The hub (started, changes applied, ``user_id``'s own sessions open) where this process runs it.

    Without autostart (tests, commands) the installed hub as it is.
    """
    if not settings.MCP_AUTOSTART:
        return get_hub()
    return await person_hub(user_id, max_age=TURN_CHECK_INTERVAL, wait=LISTING_WAIT)


def menu(hub: HubApi | None, user_id: int | None) -> dict[str, Any]:
    """``GET /api/prompts``: the console commands and the prompts ``user_id`` may use now."""
    listed = hub.prompts(user_id) if hub is not None else []
    return {
        "commands": [dict(command) for command in CONSOLE_COMMANDS],
        "prompts": [p.as_json() for p in listed],
    }


def mark_text(request: PromptRequest) -> str:
    """The console row in front of the inserted messages (never sent to the model)."""
    text = f"from prompt {request.server}/{request.name}"
    if request.arguments:
        text += " " + json.dumps(request.argument_dict, ensure_ascii=False)
    return text


@dataclass(frozen=True)
class InsertedPrompt:
    """What :func:`insert_prompt` did: the rows it stored, or why it stored nothing."""

    payloads: list[dict[str, Any]] = field(default_factory=list)  # the mark, then the messages
    titled: bool = False  # the first user message named the conversation
    error: str = ""  # why nothing was inserted ("" when it was)


# What ``POST /api/prompts/get/`` shows of a prompt it cannot put into the composer: the start of
# each of its first messages.
PREVIEW_MESSAGES = 20
PREVIEW_CHARS = 2_000


async def prompt_for_composer(request: PromptRequest, user_id: int | None) -> dict[str, Any]:
    """``POST /api/prompts/get/``: the prompt's messages for the person to send, or why they cannot be.

    A prompt of user messages only, whose text fits one message, comes back as ``insert``: the
    page puts it into the composer, where the person reads, edits and sends it. Any other prompt
    (the assistant's turns in it, or longer than a message) keeps its roles and goes in as it is
    with a ``prompt`` frame: ``insert`` is ``null`` and ``messages`` shows the start of each.
    ``PromptError`` when it cannot be got.
    """
    messages = await _got(request, user_id)
    text = "\n\n".join(message.text for message in messages)
    insertable = all(message.role == "user" for message in messages) and len(text) <= MAX_ARGUMENT_CHARS
    return {
        "insert": text if insertable else None,
        "count": len(messages),
        "messages": [
            {"role": message.role, "text": message.text[:PREVIEW_CHARS], "length": len(message.text)}
            for message in messages[:PREVIEW_MESSAGES]
        ],
    }


async def _got(request: PromptRequest, user_id: int | None) -> list[hub_prompts.PromptMessage]:
    """``prompts/get`` through the hub for ``user_id``: the prompt's messages (``PromptError`` if not)."""
    hub = await running_hub(user_id)
    if hub is None:
        raise hub_prompts.PromptError(f'MCP server "{request.server}" unreachable: no MCP hub runs here')
    _, messages = await hub.get_prompt(request.server, request.name, request.argument_dict, user_id)
    return messages


async def insert_prompt(request: PromptRequest, conversation_id: int, user_id: int | None) -> InsertedPrompt:
    """Get the prompt and store its messages after the mark; or, storing nothing, say why not."""
    try:
        messages = await _got(request, user_id)
    except hub_prompts.PromptError as exc:
        return InsertedPrompt(error=str(exc))
    store = database_sync_to_async(store_prompt)
    payloads, titled = await store(conversation_id, mark_text(request), messages)
    return InsertedPrompt(payloads=payloads, titled=titled)
