"""The hub worker (``BOOCODE_HUB=worker``): one process holds every MCP session for all web processes.

Owns: what the two sides say over the channel layer (``wire``: plain dicts, so a web process and
a worker of the same release always talk), the web process's side (``client``: ``RemoteHub``,
the same :class:`~mcpclient.engine.api.HubApi` as the in-process hub), and the worker's side
(``server``: the consumer that serves them, given its hub by the process that starts it).
May import: ``mcpclient.core``, ``telemetry``, ``config``, ``secrets``, ``engine``.
"""
