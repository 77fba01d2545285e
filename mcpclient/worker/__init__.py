"""The hub worker (``BOOCODE_HUB=worker``): one process holds every MCP session for all web processes.

Owns: what the two sides say over the channel layer (``wire``: typed envelopes, encoded to plain
dicts and checked when decoded, so a web process and a worker of the same release always talk),
the web process's side (``client``: ``RemoteHub``, the same :class:`~mcpclient.engine.api.HubApi`
as the in-process hub, with its picture of the worker's sessions in ``remote_sessions``), the
worker's side (``server``: the listener and consumer that serve them and ``serve``, which runs
the worker, given what it needs of the runtime as a ``WorkerHost``), and the signed channel
layer (``signing``). May import: ``mcpclient.core``, ``telemetry``, ``config``, ``secrets``,
``engine``; never the runtime above it, nor the models.
"""
