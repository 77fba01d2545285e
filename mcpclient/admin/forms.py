"""The admin form of an MCP server: the mcp.json entry as structured fields.

The form only parses what was typed (one argument per line, ``KEY=VALUE`` lines, a JSON
object for the other keys) and works out which fields changed; building the new entry,
validating it like the file loader and writing it are done by
:mod:`mcpclient.admin.changes`. Fields left as they were keep their keys exactly as
written in the file, so an edit of one field rewrites only that key.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

import mcpclient.admin.changes as server_changes
from mcpclient.admin.changes import MASK, ServerChangeError
from mcpclient.config.document import MAX_JSON_DEPTH, json_depth
from mcpclient.core.pinning import PIN_BLOCK, PIN_MODES
from mcpclient.core.redaction import mask_args, mask_values, redact_url
from mcpclient.models import McpServer

TEXT_FIELDS = (
    "command",
    "args",
    "env",
    "env_file",
    "cwd",
    "url",
    "headers",
    "include_tools",
    "exclude_tools",
    "read_only",
    "groups",
    "extra",
)
VALUE_FIELDS = (
    "transport",
    "enabled",
    "timeout",
    "init_timeout",
    "write_tools",
    "trusted",
    "apps",
    "pin_tools",
    "accept_new_tools",
)


def _normalise(text: str | None) -> str:
    """Text as compared for "did it change": line endings and surrounding blanks ignored."""
    return "\n".join(line.rstrip() for line in (text or "").strip().splitlines())


def parse_lines(text: str) -> list[str]:
    """One item per non-blank line."""
    return [line.rstrip("\r") for line in text.splitlines() if line.strip()]


def parse_pairs(text: str, *, what: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (the value may contain ``=``); raises ValidationError naming the line."""
    pairs: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValidationError(f"line {number}: expected {what}=VALUE")
        if key in pairs:
            raise ValidationError(f'line {number}: "{key}" is given twice')
        pairs[key] = value.rstrip("\r")
    return pairs


def format_pairs(values: dict[str, Any]) -> str:
    """``KEY=VALUE`` lines with secrets masked (placeholders shown as written)."""
    return "\n".join(f"{key}={value}" for key, value in mask_values(values).items())


class McpServerForm(forms.ModelForm):
    """Add or edit one mcp.json entry; ``self.entry`` is the validated new entry after cleaning."""

    transport = forms.ChoiceField(choices=McpServer.Transport.choices)
    command = forms.CharField(
        required=False,
        help_text=(
            "stdio: the executable (its name must be in BOOCODE_MCP_STDIO_COMMANDS). One process "
            "serves every user: its environment, credentials and files are shared by all."
        ),
    )
    args = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text=f"stdio: one argument per line. Secret-looking values are shown as {MASK}; leave them "
        "to keep them.",
    )
    env = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=f"stdio: KEY=VALUE per line. Secrets are shown as {MASK}; leave them to keep the value.",
    )
    env_file = forms.CharField(
        required=False, label="envFile", help_text="Relative to the folder of mcp.json."
    )
    cwd = forms.CharField(required=False, help_text="stdio: working directory.")
    url = forms.CharField(
        required=False,
        help_text=f"streamableHttp/sse: http:// or https:// URL. Userinfo and query values are shown "
        f"as {MASK}.",
    )
    headers = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=f"streamableHttp/sse: Name=VALUE per line. Secrets are shown as {MASK}.",
    )
    enabled = forms.BooleanField(required=False, initial=True)
    timeout = forms.IntegerField(
        required=False, min_value=1, label="timeout (ms)", help_text="Per request; empty means 60000."
    )
    init_timeout = forms.IntegerField(
        required=False,
        min_value=1,
        label="initTimeout (ms)",
        help_text="Connect and initialize; empty means 30000.",
    )
    write_tools = forms.ChoiceField(
        choices=[("reject", "reject"), ("approve", "approve")],
        label="writeTools",
        help_text=(
            'A tool that says it changes things (readOnlyHint false): "reject" leaves it out (listed '
            'here with the reason); "approve" offers it, and every call waits for the person\'s approval.'
        ),
    )
    trusted = forms.BooleanField(
        required=False,
        initial=True,
        label="trusted",
        help_text=(
            "Ticked: a tool that declares readOnlyHint: true runs without asking. Untick to make "
            "every call of this server's tools wait for the person's approval."
        ),
    )
    apps = forms.BooleanField(
        required=False,
        initial=True,
        label="apps",
        help_text=(
            "Untick to keep this server's views (MCP Apps) off the conversation: its tools then "
            "give their text results only (docs/apps.md)."
        ),
    )
    pin_tools = forms.ChoiceField(
        choices=[(mode, mode) for mode in PIN_MODES],
        initial=PIN_BLOCK,
        label="pinTools",
        help_text=(
            'A tool whose definition changes after it was accepted: "block" holds it back until it is '
            'accepted under Tool definitions, "warn" offers it and flags it, "off" accepts every change.'
        ),
    )
    accept_new_tools = forms.BooleanField(
        required=False,
        label="acceptNewTools",
        help_text="Tick to offer new tools of this server without a review (changed ones are still held).",
    )
    include_tools = forms.CharField(
        required=False,
        label="includeTools",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Only these tools (one name or pattern per line, * matches anything); empty: every tool.",
    )
    exclude_tools = forms.CharField(
        required=False,
        label="excludeTools",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Never these tools (one name or pattern per line), whatever includeTools says.",
    )
    read_only = forms.CharField(
        required=False,
        label="readOnly",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=(
            "Tools you vouch for as only reading (one name or pattern per line, * matches anything): "
            "they run without asking although they do not declare readOnlyHint: true. Empty: every "
            "tool that does not declare it waits for the person's approval before each call. Never "
            "frees a tool that declares readOnlyHint: false; not with trusted unticked."
        ),
    )
    groups = forms.CharField(
        required=False,
        label="groups",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=(
            "Who may use the server: one group name per line; only their people get its tools, "
            "prompts, resources and skills. Empty: everybody (docs/teams.md)."
        ),
    )
    extra = forms.CharField(
        required=False,
        label="other keys (JSON)",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=(
            'The rest of the entry as a JSON object, kept as written: "oauth" (docs/configuration.md) '
            "and keys other hosts use."
        ),
    )

    # The entry the page was rendered from: an edit based on an older entry is refused.
    loaded = forms.CharField(required=False, widget=forms.HiddenInput)

    # Set by the admin when writing mcp.json failed: the form is shown again with this error.
    save_error: str = ""
    save_error_field: str | None = None

    class Meta:
        model = McpServer
        fields = ["name"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        adding = self.instance.pk is None
        self.original: Any = {} if adding else server_changes.current_entry(self.instance)
        self.original_name: str | None = None if adding else self.instance.name
        values = server_changes.entry_values(self.original)
        if adding:
            values["transport"] = McpServer.Transport.STDIO
        self.start_values = values
        self.start_text = {
            "command": values["command"],
            "args": "\n".join(mask_args(values["args"])),
            "env": format_pairs(values["env"]),
            "env_file": values["env_file"],
            "cwd": values["cwd"],
            "url": redact_url(values["url"]) if values["url"] else "",
            "headers": format_pairs(values["headers"]),
            "include_tools": "\n".join(values["include_tools"]),
            "exclude_tools": "\n".join(values["exclude_tools"]),
            "read_only": "\n".join(values["read_only"]),
            "groups": "\n".join(values["groups"]),
            "extra": json.dumps(values["extra"], indent=2, ensure_ascii=False) if values["extra"] else "",
        }
        for name in TEXT_FIELDS:
            self.initial[name] = self.start_text[name]
        for name in VALUE_FIELDS:
            self.initial[name] = values[name]
        self.initial["loaded"] = server_changes.entry_digest(self.original)
        self.entry: dict[str, Any] | None = None

    def _parsed(self, name: str, text: str) -> Any:
        """The Python value of a text field (raises ValidationError or ServerChangeError)."""
        if name == "args":
            return server_changes.unmask_args(parse_lines(text), self.start_values["args"], field=name)
        if name == "url":
            return server_changes.unmask_url(text.strip(), self.start_values["url"])
        if name in ("include_tools", "exclude_tools", "read_only", "groups"):
            return [line.strip() for line in parse_lines(text)]
        if name in ("env", "headers"):
            pairs = parse_pairs(text, what="KEY" if name == "env" else "Name")
            return server_changes.unmask_values(pairs, self.start_values[name], field=name)
        if name == "extra":
            if json_depth(text) > MAX_JSON_DEPTH:
                raise ValidationError(f"nested deeper than {MAX_JSON_DEPTH} levels")
            try:
                value = json.loads(text) if text.strip() else {}
            except json.JSONDecodeError as exc:
                where = f"line {exc.lineno}, column {exc.colno}"
                raise ValidationError(f"not valid JSON: {exc.msg} ({where})") from None
            if not isinstance(value, dict):
                raise ValidationError("must be a JSON object")
            known = [key for key in value if key in server_changes.KEY_FIELDS]
            if known:
                raise ValidationError(f'"{known[0]}" has its own field above')
            return value
        return text.strip()

    def changes(self) -> dict[str, Any]:
        """The fields whose value differs from the entry's, with their new values."""
        changes: dict[str, Any] = {}
        for name in TEXT_FIELDS:
            if name not in self.cleaned_data:
                continue
            text = self.cleaned_data[name] or ""
            if _normalise(text) == _normalise(self.start_text[name]):
                continue
            try:
                changes[name] = self._parsed(name, text)
            except ValidationError as exc:
                self.add_error(name, exc)
            except ServerChangeError as exc:
                self.add_error(exc.field or name, str(exc))
        for name in VALUE_FIELDS:
            if name in self.cleaned_data and self.cleaned_data[name] != self.start_values[name]:
                changes[name] = self.cleaned_data[name]
        if self.original_name is None and "transport" in self.cleaned_data:
            # A new entry gets the transport that was chosen, not one inferred from its keys.
            changes["transport"] = self.cleaned_data["transport"]
        return changes

    def clean(self) -> dict[str, Any]:
        """Parse the fields, build the new entry and validate it like the file loader."""
        cleaned = super().clean()
        if self.save_error:
            field = self.save_error_field if self.save_error_field in self.fields else None
            self.add_error(field, self.save_error)
            return cleaned
        if self.original_name is not None and cleaned.get("loaded") != self.initial["loaded"]:
            raise ValidationError(server_changes.stale_message(self.original_name))
        changes = self.changes()
        name = cleaned.get("name")
        if self.errors or not name:
            return cleaned
        entry = server_changes.build_entry(self.original, changes)
        check_command = self.original_name is None or "command" in changes
        try:
            server_changes.validate_entry(name, entry, check_command=check_command)
        except ServerChangeError as exc:
            field = exc.field if exc.field in self.fields else None
            self.add_error(field, str(exc))
            return cleaned
        self.entry = entry
        return cleaned
