"""The app config: connects the receivers that end chat sockets with their session."""

from __future__ import annotations

from django.apps import AppConfig


class SecurityConfig(AppConfig):
    """Connects :mod:`boocode.security.sessions`' signal receivers at start-up."""

    name = "boocode.security"
    label = "boocode_security"
    verbose_name = "Security"

    def ready(self) -> None:
        """Connect the receivers (here, not at import: the user model must be loaded)."""
        from boocode.security import sessions  # it imports the user model: only once apps are ready

        sessions.connect_receivers()
