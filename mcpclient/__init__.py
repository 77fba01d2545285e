"""BooCode's MCP client: servers from mcp.json held as live sessions, their tools, and the admin.

The packages are layers, each importing only itself and those below it (docs/architecture.md,
"The layers"; checked by ``lint-imports`` in ``make test``): ``urls`` → ``admin`` and ``views``
→ ``runtime`` → ``worker`` → ``engine`` → ``secrets`` → ``config`` → ``telemetry`` → ``core``.
The Django app shell (``models``, ``migrations``, ``management``) sits beside them.
Nothing here imports ``boocode``.
"""
