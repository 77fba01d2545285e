"""The app config: connects the receivers that end chat sockets with their session and forget a
deleted person's single sign-on tokens, and tells the MCP hub where a person's ID token is read
("perUser" identity_assertion servers exchange it, SEP-990)."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig


class SecurityConfig(AppConfig):
    """Connects :mod:`boocode.security.sessions`' and :mod:`boocode.security.oidc`'s receivers at start-up."""

    name = "boocode.security"
    label = "boocode_security"
    verbose_name = "Security"

    def ready(self) -> None:
        """Connect the receivers (here, not at import: the user model must be loaded)."""
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_delete

        from boocode.security import sessions  # it imports models: only once apps are ready
        from mcpclient.runtime import id_tokens_from

        sessions.connect_receivers()
        # Single sign-on's module (authlib, joserfc, requests: about 70 ms) is imported when it is
        # first used, not by every process at start.
        post_delete.connect(
            _forget_tokens, sender=get_user_model(), dispatch_uid="boocode.security.oidc.user_deleted"
        )
        id_tokens_from(_id_token_for)


def _forget_tokens(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A deleted account's tokens from its provider go with it (in the deletion's transaction)."""
    from boocode.security import oidc

    oidc.forget_tokens(instance.pk)


def _id_token_for(user_id: int, *, min_validity: float = 60.0) -> str | None:
    """:func:`boocode.security.oidc.id_token_for`, imported at its first use."""
    from boocode.security import oidc

    return oidc.id_token_for(user_id, min_validity=min_validity)
