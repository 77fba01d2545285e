"""Live MCP sessions: one per enabled server (or per person and server), and everything on them.

Owns: the protocol revision (``protocol``), transports, healing, the OAuth provider
(``authorization``), one server's session (``connection``, with ``session_entry``,
``connection_auth``, ``connection_failures``, ``stderr_record``, ``tool_review`` and
``tool_calls``), the registry of sessions and their tools (``hub``), the lists kept fresh on
each session (``catalog``: tools, prompts, resources, skills), elicitation, progress and server
logs. The hub knows nothing of Django's models: listeners receive snapshots, and the settings it
needs are handed to it (``mcpclient.runtime.new_hub``).
The chat reaches it through one door, ``api`` (a contract says so).
May import: ``mcpclient.core``, ``mcpclient.telemetry``, ``mcpclient.config``,
``mcpclient.secrets``. Logs under ``mcpclient.hub``.
"""
