"""The values the model client deals in: where to call (:class:`LLMSettings`), what comes back
(:class:`TextDelta`, :class:`ReasoningDelta`, :class:`Completion` with its
:class:`ToolCallRequest`\\ s) and how it fails (:class:`LLMError`).

Shared by the transport (:mod:`boocode.chat.llm.client`), the wire formats it speaks (Chat
Completions there, Ollama's native API in :mod:`boocode.chat.llm.ollama`) and the probes of the
model server (:mod:`boocode.chat.llm.server`); no I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp
from django.conf import settings

from mcpclient.core.redaction import redact_text, redact_url


class LLMError(Exception):
    """A failure talking to the model; ``str()`` is a message fit to show the user.

    ``kind`` is one of: not_configured, connect, timeout, auth, model, rate_limit, server,
    request, malformed, disconnected, too_large (the request would not fit the model's window:
    nothing was sent), context_length (the server refused the request as longer than its
    window: ``window`` and ``prompt_tokens`` are its figures, when it gave them), length (the
    answer was cut for length with nothing in it).
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        status: int | None = None,
        window: int | None = None,
        prompt_tokens: int | None = None,
    ) -> None:
        # Messages are stored, sent to every tab and logged: no URL in one keeps a credential.
        super().__init__(redact_text(message))
        self.kind = kind
        self.status = status
        self.window = window
        self.prompt_tokens = prompt_tokens


@dataclass(frozen=True)
class LLMSettings:
    """Where and how to call the model."""

    base_url: str
    model: str
    api_key: str = ""
    timeout: float = 120.0
    max_retries: int = 3

    @classmethod
    def from_settings(cls, model: str = "") -> LLMSettings:
        """The BOOCODE_LLM_* settings; ``model`` (an agent's choice) overrides BOOCODE_LLM_MODEL."""
        return cls(
            base_url=settings.LLM_BASE_URL.rstrip("/"),
            model=model or settings.LLM_MODEL,
            api_key=settings.LLM_API_KEY,
            timeout=settings.LLM_TIMEOUT,
            max_retries=settings.LLM_MAX_RETRIES,
        )

    @property
    def configured(self) -> bool:
        """Whether a base URL and a model are set."""
        return bool(self.base_url and self.model)

    @property
    def url(self) -> str:
        """The Chat Completions endpoint, without the base URL's ``user:password@`` (sent as auth)."""
        return f"{without_userinfo(self.base_url)}/chat/completions"

    @property
    def root_url(self) -> str:
        """The server's root: the base URL without its userinfo and a final ``/v1``.

        Ollama, llama.cpp and LM Studio serve their own API there, beside the OpenAI one.
        """
        url = without_userinfo(self.base_url).rstrip("/")
        return url[: -len("/v1")] if url.endswith("/v1") else url

    @property
    def display_url(self) -> str:
        """The base URL as messages and logs may show it: userinfo and query values masked."""
        return redact_url(self.base_url)

    def auth_headers(self) -> dict[str, str]:
        """``Authorization`` for the request: the API key, else the base URL's ``user:password@``.

        Both at once cannot be sent (one header); the API key wins, as the more specific setting.
        """
        if self.api_key:
            return {"authorization": f"Bearer {self.api_key}"}
        parts = urlsplit(self.base_url)
        if parts.username is not None:
            credentials = aiohttp.BasicAuth(unquote(parts.username), unquote(parts.password or ""))
            return {"authorization": credentials.encode()}
        return {}


def without_userinfo(url: str) -> str:
    """``url`` without its ``user:password@``."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


@dataclass
class TextDelta:
    """A piece of the answer's text."""

    text: str


@dataclass
class ReasoningDelta:
    """A piece of the model's thinking (shown apart from the answer, never sent back)."""

    text: str


@dataclass
class ToolCallRequest:
    """One tool call the model asked for; ``arguments`` is the raw JSON text it produced."""

    id: str
    name: str
    arguments: str


Usage = tuple[int, int]  # (prompt tokens, completion tokens) of one model call


@dataclass
class Completion:
    """The end of one model call."""

    text: str
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None  # None: not reported
    model: str = ""  # the model the server says answered ("" when it did not say)
    reasoning: str = ""  # the model's thinking before its answer ("" when it showed none)
