"""Chat pages: login required, ownership, conversation management, the no-model banner."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from boocode.chat.models import Conversation, Message, ToolCall

pytestmark = pytest.mark.django_db


def test_every_page_needs_a_login(alice: Any) -> None:
    conversation = Conversation.objects.create(owner=alice)
    client = Client()
    for url in ("/", f"/c/{conversation.pk}/", f"/c/{conversation.pk}/calls/1/output/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), url
    for url in ("/c/new/", f"/c/{conversation.pk}/rename/", f"/c/{conversation.pk}/delete/"):
        assert client.post(url).status_code == 302, url
    assert Conversation.objects.filter(pk=conversation.pk).exists()


def test_login_page_and_logging_in(alice: Any) -> None:
    client = Client()
    assert b'name="password"' in client.get("/login/").content
    response = client.post("/login/", {"username": "alice", "password": "correct horse battery"})
    assert response.status_code == 302
    assert client.get("/").status_code == 200


def test_other_users_conversations_are_404(client_for: Any, alice: Any) -> None:
    conversation = Conversation.objects.create(owner=alice, title="private plans")
    message = Message.objects.create(conversation=conversation, role="assistant")
    call = ToolCall.objects.create(message=message, call_id="c", name="toolbox_echo", output="secret")
    mallory = client_for(get_user_model().objects.create_user("mallory"))
    assert mallory.get(f"/c/{conversation.pk}/").status_code == 404
    assert mallory.get(f"/c/{conversation.pk}/calls/{call.pk}/output/").status_code == 404
    assert mallory.post(f"/c/{conversation.pk}/rename/", {"title": "pwned"}).status_code == 404
    assert mallory.post(f"/c/{conversation.pk}/agent/", {"agent": "Assistant"}).status_code == 404
    assert mallory.post(f"/c/{conversation.pk}/delete/").status_code == 404
    conversation.refresh_from_db()
    assert conversation.title == "private plans"
    assert b"private plans" not in mallory.get("/").content


def test_new_rename_agent_delete(client_for: Any, alice: Any) -> None:
    client = client_for()
    response = client.get("/")
    assert response.status_code == 200 and b"Start a conversation" in response.content

    response = client.post("/c/new/")
    conversation = Conversation.objects.get(owner=alice)
    assert response["Location"] == f"/c/{conversation.pk}/"
    home = client.get("/")  # a new conversation, as after logging in; the latest is in the sidebar
    assert home.status_code == 200 and b"Start a conversation" in home.content
    assert f'href="/c/{conversation.pk}/"'.encode() in home.content

    response = client.post(
        f"/c/{conversation.pk}/rename/", {"title": "  Trip   planning "}, HTTP_ACCEPT="application/json"
    )
    assert response.json() == {"id": conversation.pk, "title": "Trip planning"}

    response = client.post(
        f"/c/{conversation.pk}/agent/", {"agent": "Assistant"}, HTTP_ACCEPT="application/json"
    )
    assert response.json()["agent"] == "Assistant"
    response = client.post(
        f"/c/{conversation.pk}/agent/", {"agent": "Nobody"}, HTTP_ACCEPT="application/json"
    )
    assert response.status_code == 400
    conversation.refresh_from_db()
    assert (conversation.title, conversation.agent_name) == ("Trip planning", "Assistant")

    page = client.get(f"/c/{conversation.pk}/")
    assert b"Trip planning" in page.content and b'<option value="Assistant" selected>' in page.content
    assert client.post(f"/c/{conversation.pk}/delete/")["Location"] == "/"
    assert not Conversation.objects.exists()


def test_page_names_the_variables_when_no_model_is_configured(
    client_for: Any, alice: Any, settings: Any
) -> None:
    conversation = Conversation.objects.create(owner=alice)
    client = client_for()
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert "No model is configured" in page
    assert "BOOCODE_LLM_BASE_URL" in page and "BOOCODE_LLM_MODEL" in page and "/tools" in page

    settings.LLM_BASE_URL, settings.LLM_MODEL = "http://127.0.0.1:9/v1", "some-model"
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert "No model is configured" not in page and "model: some-model" in page


def test_page_has_a_strict_content_security_policy(client_for: Any, alice: Any) -> None:
    conversation = Conversation.objects.create(owner=alice)
    policy = client_for().get(f"/c/{conversation.pk}/")["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "img-src 'self' data:" in policy
    assert "unsafe-inline" not in policy


def test_full_tool_output_is_plain_text(client_for: Any, alice: Any) -> None:
    conversation = Conversation.objects.create(owner=alice)
    message = Message.objects.create(conversation=conversation, role="assistant")
    call = ToolCall.objects.create(message=message, call_id="c", name="t", output="<script>x</script>" * 1000)
    response = client_for().get(f"/c/{conversation.pk}/calls/{call.pk}/output/")
    assert response["Content-Type"].startswith("text/plain")
    assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"
    assert response.content.decode() == call.output


def test_pages_answer_head_requests(client_for: Any, alice: Any) -> None:
    # Uptime checks and link previews send HEAD; a 405 there reads as "the site is down".
    conversation = Conversation.objects.create(owner=alice)
    message = Message.objects.create(conversation=conversation, role="assistant")
    call = ToolCall.objects.create(message=message, call_id="c", name="t", output="out")
    client = client_for()
    for url in ("/", f"/c/{conversation.pk}/", f"/c/{conversation.pk}/calls/{call.pk}/output/"):
        response = client.head(url)
        assert response.status_code in (200, 302), url
        assert response.content == b"", url
    assert client.head(f"/c/{conversation.pk}/").status_code == 200
    assert Client().head("/").status_code == 302  # still behind the login


async def test_favicon_is_served_by_the_running_app() -> None:
    from channels.testing import HttpCommunicator

    from boocode.asgi import application

    async def get(path: str) -> tuple[int, dict[str, str], bytes]:
        # Read by hand: HttpCommunicator.get_response trips on the file response's last
        # message, which (as ASGI allows) carries no "body".
        communicator = HttpCommunicator(application, "GET", path, headers=[(b"host", b"testserver")])
        await communicator.send_input({"type": "http.request", "body": b""})
        start = await communicator.receive_output(5)
        body = b""
        while True:
            chunk = await communicator.receive_output(5)
            body += chunk.get("body", b"")
            if not chunk.get("more_body"):
                break
        headers = {name.decode().lower(): value.decode() for name, value in start["headers"]}
        return start["status"], headers, body

    status, headers, _ = await get("/favicon.ico")
    assert (status, headers["location"]) == (301, "/static/favicon.svg")
    status, headers, body = await get(headers["location"])
    assert (status, headers["content-type"]) == (200, "image/svg+xml")
    assert body.startswith(b"<svg")


def test_pages_link_the_icon(client_for: Any, alice: Any) -> None:
    icon = '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">'
    assert icon in Client().get("/login/").content.decode()
    assert icon in client_for().get("/").content.decode()


@pytest.mark.parametrize("url", ["/c/999999/", "/no/such/page/"])
def test_a_missing_page_is_a_page_of_the_site(client_for: Any, url: str) -> None:
    response = client_for().get(url)
    assert response.status_code == 404
    body = response.content.decode()
    assert "chat/chat.css" in body and "<h1>Not found</h1>" in body
    assert '<a href="/">Back to your conversations</a>' in body
