"""People in the test database: logged-in session cookies, their conversations, what was stored.

The in-process counterpart of :func:`tests.support.live.make_accounts` (which creates accounts
in a live server's database). ``login`` is the one way a websocket test gets a session cookie;
``client_of`` and ``web_client`` are Django's test clients (sync and async) logged in.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import AsyncClient, Client

from boocode.chat.models import Conversation, Message


@sync_to_async
def login(username: str) -> str:
    """A session cookie for a (new) user."""
    user, _ = get_user_model().objects.get_or_create(username=username)
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


@sync_to_async
def conversation_of(username: str) -> int:
    """A new conversation of an existing user: its id."""
    user = get_user_model().objects.get(username=username)
    return Conversation.objects.create(owner=user).pk


@sync_to_async
def new_conversation(username: str = "alice", agent_name: str = "") -> int:
    """A new conversation (with ``agent_name``) of a user, created if need be: its id."""
    user, _ = get_user_model().objects.get_or_create(username=username)
    return Conversation.objects.create(owner=user, agent_name=agent_name).pk


async def conversation_of_new(username: str, *, staff: bool) -> int:
    """Log ``username`` in (created if need be, staff or not): a new conversation of theirs."""
    await login(username)
    await _make_staff(username, staff)
    return await conversation_of(username)


@sync_to_async
def _make_staff(username: str, staff: bool) -> None:
    get_user_model().objects.filter(username=username).update(is_staff=staff)


@sync_to_async
def stored(conversation_id: int) -> list[tuple[str, str, str]]:
    """``(role, status, content)`` of the conversation's stored messages, in order."""
    return [(m.role, m.status, m.content) for m in Message.objects.filter(conversation_id=conversation_id)]


def client_of(username: str) -> tuple[Client, Any]:
    """Django's test client logged in as ``username`` (created if need be), and the user."""
    user, _ = get_user_model().objects.get_or_create(username=username)
    client = Client()
    client.force_login(user)
    return client, user


async def web_client(username: str = "alice") -> AsyncClient:
    """Django's async test client logged in as ``username`` (created if need be)."""
    user, _ = await get_user_model().objects.aget_or_create(username=username)
    client = AsyncClient()
    await client.aforce_login(user)
    return client


@sync_to_async
def join(username: str, *groups: str) -> None:
    """Put an existing user in ``groups`` (each created if need be)."""
    user = get_user_model().objects.get(username=username)
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
