"""Conversations, their messages and the tool calls made in them.

Everything a turn produces is stored in order (``Message.id`` grows with time within a
conversation, and a conversation runs one turn at a time), so the page can be rebuilt
from the database at any moment, including mid-turn.

Nothing a user replaces is deleted: regenerating an answer or editing a message marks the
replaced rows ``superseded_at``. They stay in the database (and the admin) but leave the
page, the history frame, the exports and everything sent to the model.
"""

from __future__ import annotations

from typing import cast

from django.conf import settings
from django.db import models
from django.utils import timezone

DEFAULT_TITLE = "New conversation"
TITLE_MAX_LENGTH = 120
MODEL_NAME_LENGTH = 200


class Conversation(models.Model):
    """A chat owned by one user, answered by one agent (by name: agent rows follow AGENTS.md)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations"
    )
    title = models.CharField(max_length=TITLE_MAX_LENGTH, default=DEFAULT_TITLE)
    agent_name = models.CharField(max_length=100, blank=True, help_text="Empty: the default agent.")
    model = models.CharField(
        max_length=MODEL_NAME_LENGTH,
        blank=True,
        help_text="Empty: the agent's model (or BOOCODE_LLM_MODEL).",
    )
    title_prompt_tokens = models.PositiveIntegerField(
        default=0, help_text="Prompt tokens of the requests that asked the model for a title."
    )
    title_completion_tokens = models.PositiveIntegerField(
        default=0, help_text="Completion tokens of the requests that asked the model for a title."
    )
    allowed_tools = models.JSONField(
        default=list,
        blank=True,
        help_text="Prefixed names of tools the owner allowed for this conversation without asking again.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("-updated_at", "-id")
        indexes = [models.Index(fields=["owner", "-updated_at"])]

    def __str__(self) -> str:
        return self.title


class Message(models.Model):
    """One entry of a conversation.

    ``user`` and ``assistant`` messages are the model's history; ``console`` (a /tools or
    /call command) and ``notice`` (something the app tells the user) are shown but never
    sent to the model.
    """

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        CONSOLE = "console"
        NOTICE = "notice"

    class Status(models.TextChoices):
        STREAMING = "streaming"
        COMPLETE = "complete"
        STOPPED = "stopped"
        FAILED = "failed"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField(blank=True)
    reasoning = models.TextField(
        blank=True,
        help_text="The model's thinking before its answer (shown folded; never sent back to the model).",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.COMPLETE)
    error = models.TextField(blank=True, help_text="Why the message failed, for the user.")
    model = models.CharField(
        max_length=MODEL_NAME_LENGTH, blank=True, help_text="The model that answered (assistant messages)."
    )
    prompt_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Empty: the model server sent no usage for this answer."
    )
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    attachments = models.JSONField(
        default=list,
        blank=True,
        help_text="Resources attached to the message (URI, server, name, MIME type, what the model read).",
    )
    superseded_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a regenerated answer or an edited message replaced it (empty: current).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("id",)
        indexes = [models.Index(fields=["conversation", "id"])]

    def __str__(self) -> str:
        return f"{self.role} #{self.pk}"

    @property
    def usage(self) -> dict[str, int] | None:
        """``{"prompt_tokens", "completion_tokens"}``, or ``None`` when the server sent no usage."""
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return {"prompt_tokens": self.prompt_tokens or 0, "completion_tokens": self.completion_tokens or 0}


class ContextSummary(models.Model):
    """What the model reads instead of a conversation's earlier messages (compaction, docs/models.md).

    Written by the conversation's own model when a request would pass its share of the window
    (or on ``/compact``); it stands for the conversation's messages up to and including
    ``up_to`` (a message id) and is reused by every later request until a newer one is made.
    The messages themselves are never changed. One that covers a message superseded after it
    was written is stale and not used.
    """

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="summaries")
    up_to = models.PositiveBigIntegerField(help_text="The id of the last message the summary stands for.")
    messages = models.PositiveIntegerField(help_text="How many messages it stands for.")
    model = models.CharField(max_length=MODEL_NAME_LENGTH, blank=True, help_text="The model that wrote it.")
    text = models.TextField()
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("id",)
        indexes = [models.Index(fields=["conversation", "id"])]

    def __str__(self) -> str:
        return f"summary of conversation {self.conversation_id} up to #{self.up_to}"


class ToolCall(models.Model):
    """A tool call requested by an assistant message (or a /call command) and its result."""

    class Status(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        ERROR = "error"
        CANCELLED = "cancelled"
        SKIPPED = "skipped"

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="tool_calls")
    index = models.PositiveSmallIntegerField(default=0, help_text="Position within the message.")
    call_id = models.CharField(max_length=200, help_text="The id the model gave the call.")
    name = models.CharField(max_length=200)
    server = models.CharField(
        max_length=100, blank=True, help_text="The MCP server that served the tool (empty: a native tool)."
    )
    tool = models.CharField(max_length=255, blank=True, help_text="The tool's name on its server.")
    title = models.CharField(max_length=255, blank=True, help_text="The tool's display name from its server.")
    view = models.CharField(
        max_length=2048,
        blank=True,
        help_text="The ui:// view its result is shown in (MCP Apps; docs/apps.md).",
    )
    view_context = models.JSONField(
        null=True,
        blank=True,
        help_text="What its view last gave the model to read (ui/update-model-context): text and time.",
    )
    arguments = models.TextField(blank=True, help_text="The arguments as the model wrote them (JSON text).")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    output = models.TextField(blank=True, help_text="What the model reads back.")
    is_error = models.BooleanField(default=False)
    parts = models.JSONField(default=list, blank=True, help_text="Images and audio for the UI.")
    structured = models.JSONField(
        null=True, blank=True, help_text="The result's structuredContent (left out when over the output cap)."
    )
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("message_id", "index", "id")

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"


class Preference(models.Model):
    """A user's own settings for the chat page."""

    class Theme(models.TextChoices):
        SYSTEM = "system"
        LIGHT = "light"
        DARK = "dark"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_preference"
    )
    theme = models.CharField(max_length=10, choices=Theme.choices, default=Theme.SYSTEM)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"preferences of {self.user}"


class ToolApproval(models.Model):
    """A tool call that waited for the conversation owner's approval, and what was decided.

    Kept for audit: staff see every decision (who, when, which arguments) in the admin.
    """

    class Decision(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DENIED = "denied"
        # A member given a label is a (value, label) pair in the class body, a str once Django's
        # enum has made it: cast says the latter to the type checker, which knows no Django.
        ALLOWED = cast(str, ("allowed", "allowed for the conversation"))
        EXPIRED = cast(str, ("expired", "expired (denied)"))
        STOPPED = cast(str, ("stopped", "stopped with the turn"))

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="approvals")
    tool_call = models.ForeignKey(
        ToolCall, on_delete=models.CASCADE, related_name="approvals", null=True, blank=True
    )
    server = models.CharField(max_length=100)
    tool = models.CharField(max_length=255, help_text="The tool's name on its server.")
    name = models.CharField(max_length=200, help_text="The prefixed name the model called.")
    arguments = models.TextField(blank=True, help_text="The arguments as the model wrote them (JSON text).")
    hints = models.JSONField(default=dict, blank=True, help_text="The tool's annotations when it was called.")
    reason = models.CharField(
        max_length=200, blank=True, help_text="Why approval was needed (a write tool, an untrusted server)."
    )
    decision = models.CharField(max_length=10, choices=Decision.choices, default=Decision.PENDING)
    remember = models.BooleanField(default=False, help_text="Allowed for the rest of the conversation.")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=["conversation", "decision"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.decision})"


class ToolCallAudit(models.Model):
    """One tool call, kept for audit: append-only (the admin neither changes nor deletes rows).

    Written by every process that runs calls (:mod:`boocode.chat.ledger.audit`), whichever way the
    call came: the model, the tool console or a view (MCP Apps). No foreign key to the
    conversation: the row outlives it. Arguments are kept with secrets masked, cut at
    ``boocode.chat.ledger.audit.MAX_ARGUMENTS`` characters; results only by size.
    """

    class Origin(models.TextChoices):
        MODEL = "model"
        CONSOLE = "console"
        VIEW = "view"

    class Outcome(models.TextChoices):
        OK = "ok"
        ERROR = "error"
        REFUSED = cast(str, ("refused", "refused (not run)"))  # a str, as Decision's labelled members
        CANCELLED = "cancelled"

    created_at = models.DateTimeField(default=timezone.now, db_index=True, help_text="When the call began.")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    username = models.CharField(max_length=150, blank=True, help_text="Who, as named when the call ran.")
    conversation_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    agent = models.CharField(max_length=100, blank=True)
    origin = models.CharField(max_length=10, choices=Origin.choices)
    server = models.CharField(max_length=100, help_text='The MCP server, or "native".')
    tool = models.CharField(max_length=255, help_text="The tool's name on its server.")
    name = models.CharField(max_length=200, help_text="The name the model sees.")
    digest = models.CharField(max_length=64, blank=True, help_text="SHA-256 of the tool's definition.")
    arguments = models.TextField(blank=True, help_text="The arguments, secrets masked (JSON text).")
    argument_bytes = models.PositiveIntegerField(default=0)
    result_bytes = models.PositiveIntegerField(default=0)
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    error = models.CharField(max_length=300, blank=True, help_text="The start of the error the model read.")
    duration_ms = models.PositiveIntegerField(default=0)
    approval = models.CharField(max_length=10, blank=True, help_text="The decision, if the call needed one.")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ("-created_at", "-id")
        verbose_name = "tool call (audit)"
        verbose_name_plural = "tool calls (audit)"
        indexes = [models.Index(fields=["server", "created_at"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.outcome})"


class DailyUsage(models.Model):
    """What one person spent on one day (UTC): tokens, model answers and tool calls.

    One row per (user, day), added to where the spending is stored (:mod:`boocode.chat.ledger.daily_usage`,
    ``F()`` increments), so the budget check reads one row and the admin lists one row per person
    and day. Kept when a conversation is deleted or the audit log is pruned: it is what was spent.
    """

    # No index of its own: the unique (user, day) constraint's index starts with it.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    day = models.DateField(help_text="The day, in UTC.")
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    answers = models.PositiveIntegerField(default=0, help_text="Answers the model completed.")
    answers_without_usage = models.PositiveIntegerField(
        default=0, help_text="Completed answers the model server reported no tokens for."
    )
    tool_calls = models.PositiveIntegerField(
        default=0, help_text="Tool calls run (the model's, /call, a view's); refused calls are not counted."
    )
    # Model requests in flight hold their estimated tokens here until their usage is counted
    # (boocode.chat.ledger.budgets): the budget check before each request counts them. A hold that
    # nobody released (a process that died mid-request) no longer counts after reserved_until.
    reserved_tokens = models.PositiveBigIntegerField(
        db_default=0, help_text="Tokens held by model requests in flight (their estimate)."
    )
    reserved_until = models.DateTimeField(
        null=True, blank=True, help_text="When the tokens held stop counting unless held again."
    )

    class Meta:
        ordering = ("-day", "user_id")
        verbose_name = "usage per person and day"
        verbose_name_plural = "usage per person and day"
        constraints = [models.UniqueConstraint(fields=["user", "day"], name="chat_dailyusage_user_day")]
        indexes = [models.Index(fields=["day"], name="chat_dailyusage_day")]

    def __str__(self) -> str:
        return f"{self.user_id} on {self.day}"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class TokenBudget(models.Model):
    """A daily token budget of one person or one group.

    Which one applies: :mod:`boocode.chat.ledger.budgets`.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="The person (leave empty for a group).",
    )
    group = models.ForeignKey(
        "auth.Group",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="The group (leave empty for a person).",
    )
    tokens_per_day = models.PositiveBigIntegerField(
        help_text="Prompt and completion tokens a day (UTC). 0: no limit."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("group_id", "user_id")
        verbose_name = "daily token budget"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(user__isnull=False, group__isnull=True)
                | models.Q(user__isnull=True, group__isnull=False),
                name="chat_tokenbudget_user_or_group",
                violation_error_message="Choose a person or a group (one of them).",
            ),
            models.UniqueConstraint(
                fields=["user"],
                condition=models.Q(user__isnull=False),
                name="chat_tokenbudget_one_per_user",
                violation_error_message="This person has a budget already: change that one.",
            ),
            models.UniqueConstraint(
                fields=["group"],
                condition=models.Q(group__isnull=False),
                name="chat_tokenbudget_one_per_group",
                violation_error_message="This group has a budget already: change that one.",
            ),
        ]

    def __str__(self) -> str:
        limit = f"{self.tokens_per_day:,} tokens a day" if self.tokens_per_day else "no limit"
        return f"{self.user or self.group}: {limit}"
