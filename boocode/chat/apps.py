from typing import Any

from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "boocode.chat"
    label = "chat"
    verbose_name = "Chat"

    def ready(self) -> None:
        # The hub worker runs a call that needs approval only with an approval recorded here.
        # (Imported here: models load once the app registry is ready.)
        from channels.db import database_sync_to_async

        from boocode.chat.calls.approvals import approval_holds
        from mcpclient.core.approval import check_approvals_with

        check = database_sync_to_async(approval_holds, thread_sensitive=False)

        async def checked(approval_id: int, name: str, arguments: dict[str, Any], user_id: int | None) -> str:
            return await check(approval_id, name, arguments, user_id)

        check_approvals_with(checked)

        # Tool search indexes the servers' tools when they change, not at the first search.
        from boocode.tools.deferred import warmer
        from mcpclient.runtime import on_tools_changed

        on_tools_changed(warmer.changed)

        # Once the MCP servers' tools are known, an agent whose model's window cannot hold them
        # (and the system prompt) is named in the log with what to change.
        from boocode.chat.turn.window_check import warn_small_windows
        from mcpclient.runtime import on_hub_started

        on_hub_started(warn_small_windows)
