"""Database mirror of data/mcp.json, the tools discovered on each server, and the secret store.

``McpServer.config`` holds the entry exactly as written in the file (placeholders such as
``${TOKEN}`` unexpanded, unknown keys kept). Status fields are written by the hub.
``StoredSecret`` rows are read and written only by :mod:`mcpclient.secrets.store`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from mcpclient.core import mcp_apps

# RFC 5424 severities, as MCP's logging/setLevel names them (least severe first).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class McpServer(models.Model):
    """One entry of mcp.json and the live state of its connection."""

    class Status(models.TextChoices):
        DISABLED = "disabled", "disabled"
        CONNECTING = "connecting", "connecting"
        READY = "ready", "ready"
        FAILED = "failed", "failed"
        UNAVAILABLE = "unavailable", "unavailable"
        AUTH_REQUIRED = "auth_required", "needs a sign-in"
        PER_USER = "per_user", "per person"

    class Transport(models.TextChoices):
        STDIO = "stdio", "stdio"
        STREAMABLE_HTTP = "streamableHttp", "Streamable HTTP"
        SSE = "sse", "SSE (legacy)"

    name = models.CharField(max_length=100, unique=True)
    position = models.PositiveIntegerField(default=0, help_text="Order of the entry in mcp.json.")
    transport = models.CharField(max_length=20, choices=Transport.choices, blank=True)
    enabled = models.BooleanField(default=True)
    config = models.JSONField(default=dict, help_text="The entry as written in mcp.json (raw values).")
    config_error = models.TextField(blank=True, help_text="Why the entry is invalid, if it is.")

    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DISABLED)
    last_error = models.TextField(blank=True)
    connected_at = models.DateTimeField(null=True, blank=True)
    tool_count = models.PositiveIntegerField(default=0)
    rejected_count = models.PositiveIntegerField(default=0)
    filtered_count = models.PositiveIntegerField(
        default=0, help_text='Tools left out by the entry\'s "includeTools"/"excludeTools".'
    )
    tools_note = models.TextField(
        blank=True,
        help_text=(
            "What the last tool listing repaired or left out: definitions read leniently, unusable ones, "
            "tools past the limit per server (1,000)."
        ),
    )
    active_transport = models.CharField(
        max_length=20,
        choices=Transport.choices,
        blank=True,
        help_text="The transport the live session uses (a URL without a type may fall back to SSE).",
    )
    protocol_version = models.CharField(max_length=40, blank=True)
    server_info = models.JSONField(default=dict, blank=True)
    stderr_tail = models.TextField(blank=True, help_text="The last lines the server wrote to stderr.")
    # Healing (mcpclient/engine/healing.py): automatic reconnect attempts in a row, when the next starts.
    reconnect_attempts = models.PositiveIntegerField(
        default=0, help_text="Automatic reconnect attempts in a row since the server was last ready."
    )
    next_retry_at = models.DateTimeField(
        null=True, blank=True, help_text="When the next automatic reconnect attempt starts (empty: none)."
    )
    circuit_open = models.BooleanField(
        default=False,
        help_text="Reconnects hit their limit: one try per BOOCODE_MCP_RECONNECT_CIRCUIT_SECONDS.",
    )
    log_level = models.CharField(
        max_length=10,
        blank=True,
        choices=[(level, level) for level in LOG_LEVELS],
        help_text="The level asked of the server with logging/setLevel (empty: the server's default).",
    )
    log_tail = models.JSONField(
        default=list,
        blank=True,
        help_text="The last notifications/message the server sent: {time, level, logger, data}.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "name"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name


def both_visibilities() -> list[str]:
    """A tool's visibility when its server declares none: the model's and its views'."""
    return list(mcp_apps.VISIBILITY)


class McpTool(models.Model):
    """A tool discovered on a server; rejected and filtered tools are kept with the reason.

    ``rejected``: the read-only guard refused it. ``filtered``: the entry's ``includeTools`` /
    ``excludeTools`` left it out. Either way it is never offered to the model; ``reject_reason``
    says why. ``title`` and ``icons`` come from the server, cleaned by
    :mod:`mcpclient.core.tool_metadata`: they are untrusted and only ever shown as text.
    """

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=255, help_text="The tool's name on its server.")
    prefixed_name = models.CharField(max_length=64, help_text="The name the model sees.")
    title = models.CharField(
        max_length=255, blank=True, help_text='The display name: "title", else "annotations.title".'
    )
    description = models.TextField(blank=True)
    input_schema = models.JSONField(default=dict)
    output_schema = models.JSONField(null=True, blank=True)
    icons = models.JSONField(
        default=list, blank=True, help_text="Icons with an https: or data:image/ source (never fetched)."
    )
    annotations = models.JSONField(null=True, blank=True)
    rejected = models.BooleanField(default=False)
    filtered = models.BooleanField(default=False)
    reject_reason = models.TextField(
        "reason", blank=True, help_text="Why a rejected or filtered tool is not offered to the model."
    )
    warning = models.TextField(blank=True)
    position = models.PositiveIntegerField(default=0)
    # MCP Apps (mcpclient.core.mcp_apps): the view its results are shown in, and who may call it.
    ui_resource_uri = models.CharField(
        "view",
        max_length=2048,
        blank=True,
        help_text="The ui:// resource its results are shown in (MCP Apps).",
    )
    visibility = models.JSONField(
        default=both_visibilities,
        help_text='Who may call it: "model" (offered to the model) and "app" (its server\'s views).',
    )
    # Pinning (mcpclient.core.pinning): the listed definition's digest, whether it is held back
    # until an administrator accepts it, why, and what the poisoning check found.
    digest = models.CharField(max_length=64, blank=True, help_text="SHA-256 of the listed definition.")
    held = models.BooleanField(default=False, help_text="Held back until an administrator accepts it.")
    pin_note = models.TextField("definition", blank=True)
    findings = models.JSONField(default=list, blank=True, help_text="What the poisoning check found.")

    class Meta:
        ordering = ["server__position", "position"]
        constraints = [
            models.UniqueConstraint(fields=["server", "name"], name="mcptool_unique_name_per_server"),
        ]
        verbose_name = "MCP tool"

    def __str__(self) -> str:
        return self.prefixed_name

    @property
    def read_only(self) -> bool:
        """False only when the server explicitly says the tool is not read-only."""
        return not (self.annotations and self.annotations.get("readOnlyHint") is False)


class ToolPin(models.Model):
    """A tool's accepted definition, and the one its server lists now (mcpclient.core.pinning).

    Kept by server name, not by row: a server removed and declared again keeps what was
    accepted. ``digest`` "" means never accepted (a new tool of a known server, held).
    """

    server = models.CharField(max_length=100)
    tool = models.CharField(max_length=255)
    digest = models.CharField(max_length=64, blank=True, help_text="SHA-256 of the accepted definition.")
    definition = models.JSONField(null=True, blank=True, help_text="The accepted definition.")
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Empty: accepted when the server was first seen, or by its pinTools setting.",
    )
    listed_digest = models.CharField(max_length=64, blank=True, help_text="SHA-256 of the listed definition.")
    listed = models.JSONField(null=True, blank=True, help_text="The definition the server lists now.")
    listed_at = models.DateTimeField(null=True, blank=True)
    findings = models.JSONField(default=list, blank=True, help_text="What the poisoning check found.")

    class Meta:
        ordering = ["server", "tool"]
        constraints = [models.UniqueConstraint(fields=["server", "tool"], name="toolpin_unique_tool")]
        verbose_name = "tool definition"

    def __str__(self) -> str:
        return f"{self.server} / {self.tool}"

    @property
    def pending(self) -> bool:
        """True when the listed definition is not the accepted one."""
        return bool(self.listed_digest) and self.listed_digest != self.digest


class McpState(models.Model):
    """A single row whose ``version`` changes whenever servers change in any process.

    The running web process reads it before a turn (at most once a second) to pick up
    changes made by ``manage.py mcp_sync`` / ``mcp_discover`` or the admin in another process.
    """

    version = models.PositiveBigIntegerField(default=0)
    config_mtime_ns = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = "MCP state"


class StoredSecret(models.Model):
    """One encrypted secret (an ``${input:ID}`` value, an OAuth credential).

    Only :mod:`mcpclient.secrets.store` reads or writes this table: ``ciphertext`` is a Fernet
    token whose key lives outside the database, so a copy of the database alone reveals nothing.
    """

    kind = models.CharField(max_length=40, help_text='What the secret is for, e.g. "input".')
    name = models.CharField(max_length=255)
    ciphertext = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["kind", "name"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "name"], name="storedsecret_unique_kind_name"),
        ]
        verbose_name = "stored secret"

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


class PersonalServer(models.Model):
    """A remote MCP server a person added for themselves (mcpclient.runtime.personal; never stdio).

    Only its person lists, uses or removes it. A header's value is in the secret store (kind
    ``personal-headers``, named by this row's id), never here.
    """

    class Transport(models.TextChoices):
        HTTP = "http", "Streamable HTTP"
        SSE = "sse", "SSE"

    class SignIn(models.TextChoices):
        NONE = "none", "none"
        HEADER = "header", "a header"
        OAUTH = "oauth", "OAuth (Connect)"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_servers")
    name = models.CharField(max_length=40, help_text="Prefixes the tools' names, as an mcp.json server's.")
    url = models.CharField(max_length=2000)
    transport = models.CharField(max_length=10, choices=Transport.choices, default=Transport.HTTP)
    sign_in = models.CharField(max_length=10, choices=SignIn.choices, default=SignIn.NONE)
    header_name = models.CharField(max_length=100, blank=True)
    writes = models.BooleanField(
        default=False, help_text="Write tools offered, each call approved by the person (else refused)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["owner", "name"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="personalserver_unique_name")]
        verbose_name = "server of one's own"
        verbose_name_plural = "servers of one's own"

    def __str__(self) -> str:
        return f"{self.name} ({self.owner_id})"
