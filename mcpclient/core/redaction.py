"""Keep secrets out of what people and logs see: URLs, command arguments, free text.

Secrets reach BooCode as literal values in mcp.json (``args``, ``env``, ``headers``, a ``url``'s
userinfo or query string) and in settings (a model URL with ``user:password@``). Wherever such a
value could be shown — the admin, ``mcp_discover --json``, error messages stored in rows and sent
in frames, log lines — it is replaced by :data:`MASK` first. ``${VAR}`` placeholders are not
secrets (the value lives in the environment) and stay visible, so an administrator can see
which variable a server reads.

- :func:`redact_url` masks a URL's userinfo and every query value.
- :func:`mask_arg` masks a command-line argument that looks like a secret (see its rules).
- :func:`redact_text` masks every URL and ``Bearer`` token inside free text (error messages).
- :class:`RedactingFormatter` applies :func:`redact_text` to every formatted log record.
- :func:`redact_oauth_text` also masks OAuth's secret fields (``client_secret``, tokens, codes,
  ``code_verifier``, assertions) written as JSON, a Python mapping or a form; :class:`OAuthLogFilter`
  applies it to the records of the SDK's OAuth loggers (:data:`SDK_OAUTH_LOGGERS`), message and
  traceback, before any handler sees them.

Masking is one-way; the admin keeps stored values by comparing what it showed with what comes
back (:func:`mcpclient.admin.changes.unmask_values`).
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Mapping, Sequence
from urllib.parse import parse_qsl, urlsplit, urlunsplit

__all__ = [
    "MASK",
    "SDK_OAUTH_LOGGERS",
    "OAuthLogFilter",
    "RedactingFormatter",
    "install_oauth_log_filter",
    "is_shown",
    "mask_arg",
    "mask_args",
    "mask_values",
    "masked_entry",
    "redact_arguments",
    "redact_oauth_text",
    "redact_text",
    "redact_url",
]

MASK = "••••••"

# ${VAR}, ${env:VAR}, {env:VAR} and ${input:ID}: references to values kept elsewhere.
_PLACEHOLDER_RE = re.compile(
    r"\$\{(?:env:|input:)?[A-Za-z_][A-Za-z0-9_.-]*(?::-[^}]*)?\}|\{env:[A-Za-z_][A-Za-z0-9_]*\}"
)
_URL_IN_TEXT_RE = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
_BEARER_RE = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
# Words that make a flag or variable name secret-bearing: --api-key, --token, PASSWORD=...
_SECRET_NAME_RE = re.compile(
    r"(?i)(token|secret|passw(or)?d|pwd|api[-_]?key|apikey|access[-_]?key|private[-_]?key|auth|"
    r"credential|bearer|cookie|session|signature|client[-_]?secret)"
)
# Well-known credential shapes: sk-..., ghp_..., github_pat_..., xoxb-..., glpat-..., AKIA...
_TOKEN_PREFIX_RE = re.compile(
    r"^(sk-|sk_|pk_|rk_|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|xox[abprs]-|AKIA|ASIA|AIza|ya29\.|eyJ)"
)


# What may stay visible around placeholders: an auth scheme ("Bearer ") and separators.
_SHOWN_REMAINDER_RE = re.compile(r"^[\s:/@.,;_-]*(?:[A-Za-z]+ +)?[\s:/@.,;_-]*$")


def is_shown(value: object) -> bool:
    """True when ``value`` may be displayed: made of placeholders (and at most an auth scheme)."""
    if not isinstance(value, str) or not _PLACEHOLDER_RE.search(value):
        return False
    return bool(_SHOWN_REMAINDER_RE.match(_PLACEHOLDER_RE.sub("", value)))


def _masked(value: str) -> str:
    return value if not value or is_shown(value) else MASK


def mask_values(values: Mapping[str, object]) -> dict[str, object]:
    """``values`` (``env``, ``headers``) with every value that is not a placeholder masked."""
    return {key: value if is_shown(value) else MASK for key, value in values.items()}


def redact_url(url: str) -> str:
    """``url`` with its userinfo and every query value masked (placeholders stay as written).

    ``https://user:pw@host/p?key=abc&x=${X}`` becomes ``https://••••••@host/p?key=••••••&x=${X}``.
    Text that does not parse as a URL comes back with anything that looks like userinfo masked.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return re.sub(r"//[^/@\s]*@", f"//{MASK}@", url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, password = userinfo.partition(":")
        netloc = f"{_masked(user)}{colon}{_masked(password) if colon else ''}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if pairs:
            query = "&".join(f"{key}={_masked(value)}" if value else key for key, value in pairs)
        else:
            query = _masked(query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _looks_like_token(value: str) -> bool:
    """A bare value shaped like a credential: a known prefix, or a long mix of letters and digits."""
    if _TOKEN_PREFIX_RE.match(value):
        return True
    if len(value) < 20 or any(char in value for char in "/\\@ ") or value.startswith("-"):
        return False
    has_digit = any(char.isdigit() for char in value)
    has_alpha = any(char.isalpha() for char in value)
    return has_digit and has_alpha and re.fullmatch(r"[A-Za-z0-9_\-.=+]+", value) is not None


def mask_arg(arg: str, previous: str | None = None) -> str:
    """One command-line argument as it may be shown.

    Masked: the value after a flag whose name mentions a secret (``--token abc``), the value of
    ``--token=abc`` or ``API_KEY=abc``, a URL's userinfo and query values, and values shaped like
    credentials (``sk-...``, ``ghp_...``, long mixes of letters and digits). Flags, paths, package
    names and placeholders stay readable.
    """
    if is_shown(arg):
        return arg
    if previous is not None and previous.startswith("-") and "=" not in previous:
        if _SECRET_NAME_RE.search(previous):
            return MASK
    if "://" in arg:
        return redact_text(arg)
    name, sep, value = arg.partition("=")
    if sep and name:
        if _SECRET_NAME_RE.search(name):
            return f"{name}={_masked(value)}"
        inner = mask_arg(value)  # --tag=sk-..., --opt=token=...: the value on its own terms
        if inner != value:
            return f"{name}={inner}"
    if _looks_like_token(arg):
        return MASK
    return arg


def mask_args(args: Sequence[object]) -> list[str]:
    """Every argument through :func:`mask_arg`, each knowing the one before it."""
    texts = [str(arg) for arg in args]
    return [mask_arg(arg, texts[index - 1] if index else None) for index, arg in enumerate(texts)]


def masked_entry(entry: object) -> object:
    """A copy of an mcp.json entry that is safe to display.

    ``env``/``environment``/``headers`` values, secret-looking ``args`` (and the arguments of an
    opencode ``command`` array) and the ``url``'s userinfo and query values are masked.
    """
    if not isinstance(entry, dict):
        return entry
    shown = copy.deepcopy(entry)
    for key in ("env", "environment", "headers"):
        if isinstance(shown.get(key), dict):
            shown[key] = mask_values(shown[key])
    if isinstance(shown.get("args"), list):
        shown["args"] = mask_args(shown["args"])
    if isinstance(shown.get("command"), list):
        shown["command"] = mask_args(shown["command"])
    if isinstance(shown.get("url"), str):
        shown["url"] = redact_url(shown["url"])
    return shown


def redact_text(text: str) -> str:
    """``text`` with every URL passed through :func:`redact_url` and bearer/basic tokens masked."""
    if "://" in text:
        text = _URL_IN_TEXT_RE.sub(lambda match: redact_url(match.group(0)), text)
    if "earer" in text or "asic" in text:
        text = _BEARER_RE.sub(lambda match: f"{match.group(1)} {MASK}", text)
    return text


class RedactingFormatter(logging.Formatter):
    """A log formatter whose output (message and traceback) went through :func:`redact_text`.

    Installed on the console handler in settings, so a URL with a password or a token in its
    query string never reaches a log line, whichever library logged it.
    """

    def format(self, record: logging.LogRecord) -> str:
        """The formatted record, redacted."""
        return redact_text(super().format(record))


# OAuth's secret fields (RFC 6749, 7523, 7591, 7636, 8693) as a flow's messages quote them: a JSON
# body ("client_secret":"…"), a Python mapping ('code': '…'), a form or query (code_verifier=…).
_OAUTH_FIELD_RE = re.compile(
    r"(?P<key>[\"']?\b(?:client_secret|access_token|refresh_token|id_token|registration_access_token|"
    r"code_verifier|code|client_assertion|assertion|subject_token|actor_token|password)\b[\"']?\s*[:=]\s*)"
    r"(?P<quote>[\"']?)(?:\\.|[^\"'&\s,;}\]])+"
)
# The SDK's modules that log during a sign-in ("OAuth flow error" with its exception, whose text
# may quote a registration's or a token endpoint's answer). A logger's filter sees only the
# records logged to that very logger, so each is named.
SDK_OAUTH_LOGGERS = (
    "mcp.client.auth",
    "mcp.client.auth.oauth2",
    "mcp.client.auth.utils",
    "mcp.client.auth.extensions.client_credentials",
    "mcp.client.auth.extensions.identity_assertion",
)


def redact_oauth_text(text: str) -> str:
    """``text`` through :func:`redact_text`, with the values of OAuth's secret fields masked."""
    return _OAUTH_FIELD_RE.sub(
        lambda match: f"{match.group('key')}{match.group('quote')}{MASK}", redact_text(text)
    )


class OAuthLogFilter(logging.Filter):
    """Masks secrets in a record of the SDK's OAuth code before any handler formats it.

    The message (its arguments merged in) and the traceback go through :func:`redact_oauth_text`;
    the exception itself is dropped from the record (its rendered, redacted text stays), so no
    handler renders it again with the secrets in.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; it is always kept."""
        record.msg, record.args = redact_oauth_text(record.getMessage()), ()
        if record.exc_info:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:
            record.exc_text = redact_oauth_text(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_oauth_text(record.stack_info)
        return True


def install_oauth_log_filter() -> None:
    """Put one :class:`OAuthLogFilter` on each of :data:`SDK_OAUTH_LOGGERS` (once, however often called)."""
    for name in SDK_OAUTH_LOGGERS:
        sdk_logger = logging.getLogger(name)
        if not any(isinstance(existing, OAuthLogFilter) for existing in sdk_logger.filters):
            sdk_logger.addFilter(OAuthLogFilter())


def redact_arguments(value: object, *, depth: int = 0) -> object:
    """A tool call's arguments as they may be kept (the audit log): secrets masked, JSON kept.

    A value under a key whose name mentions a secret (``password``, ``apiKey``, ``token``...)
    is masked whole; a string shaped like a credential (``sk-...``, ``ghp_...``, a long mix of
    letters and digits) is masked; URLs and bearer tokens inside text go through
    :func:`redact_text`. Nesting past 20 levels is cut (``"…"``).
    """
    if depth > 20:
        return "…"
    if isinstance(value, Mapping):
        return {
            str(key): MASK if _SECRET_NAME_RE.search(str(key)) else redact_arguments(item, depth=depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_arguments(item, depth=depth + 1) for item in value]
    if isinstance(value, str):
        return MASK if _looks_like_token(value) else redact_text(value)
    return value
