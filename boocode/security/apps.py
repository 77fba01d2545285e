"""The app config: connects the receivers that end chat sockets with their session and forget a
deleted person's single sign-on tokens, and tells the MCP hub where a person's ID token is read
("perUser" identity_assertion servers exchange it, SEP-990)."""

from __future__ import annotations

from django.apps import AppConfig


class SecurityConfig(AppConfig):
    """Connects :mod:`boocode.security.sessions`' and :mod:`boocode.security.oidc`'s receivers at start-up."""

    name = "boocode.security"
    label = "boocode_security"
    verbose_name = "Security"

    def ready(self) -> None:
        """Connect the receivers (here, not at import: the user model must be loaded)."""
        from boocode.security import oidc, sessions  # they import models: only once apps are ready
        from mcpclient.runtime import id_tokens_from

        sessions.connect_receivers()
        oidc.connect_receivers()
        id_tokens_from(oidc.id_token_for)
