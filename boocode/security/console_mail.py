"""Emails printed on the server's output, readable: the console backend without the wire's encoding.

Without an SMTP host (``BOOCODE_EMAIL_HOST``) a password reset link is printed for an
administrator to pass on. Django's console backend prints the message as it would be sent:
quoted-printable cuts long lines with ``=`` soft breaks (and writes ``=`` itself as ``=3D``), so a
link printed so cannot be pasted. This backend prints the headers, then each text part decoded,
whole lines as written; an attachment is named, not printed.
"""

from __future__ import annotations

from email.message import Message

from django.core.mail import EmailMessage
from django.core.mail.backends.console import EmailBackend as DjangoConsoleBackend

__all__ = ["EmailBackend", "readable"]

RULE = "-" * 79
_PLUMBING = {"mime-version", "content-transfer-encoding"}


def _headers(part: Message) -> list[str]:
    """The part's headers but the MIME plumbing (what is printed is decoded)."""
    return [f"{name}: {value}" for name, value in part.items() if name.lower() not in _PLUMBING]


def readable(wire: Message) -> str:
    """``wire`` as a person reads it: its headers, then each text part's decoded content."""
    lines = _headers(wire)
    for part in wire.walk():
        if part.is_multipart():
            continue
        if part is not wire:
            lines += ["", f"[{part.get_content_type()}]"]
        if part.get_content_maintype() == "text" and not part.get_filename():
            payload = part.get_payload(decode=True)
            raw = payload if isinstance(payload, bytes) else b""
            text = raw.decode(part.get_content_charset() or "utf-8", errors="replace")
            lines += ["", text.rstrip("\n")]
        else:
            size = len(part.get_payload(decode=True) or b"")
            lines.append(f"(attachment {part.get_filename() or 'without a name'}, {size} bytes)")
    return "\n".join(lines)


class EmailBackend(DjangoConsoleBackend):
    """Django's console backend, printing each message decoded (:func:`readable`)."""

    def write_message(self, message: EmailMessage) -> None:
        """Write ``message`` decoded, then a rule."""
        self.stream.write(f"{readable(message.message())}\n{RULE}\n")
