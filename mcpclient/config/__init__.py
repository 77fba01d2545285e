"""mcp.json in, ``ServerConfig`` out: pure functions over text and values.

Owns: the data model (``model``), the JSON-with-comments reader (``document``), every host
dialect's validation (``entries``, ``shapes``), loading the file (``loading``), the envFile
reader (``dotenv``), resolution for connecting (``resolve``), atomic write-back (``writeback``).
Nothing here reads the database or a secret: the ``${input:}`` lookup is passed in.
May import: ``mcpclient.core``. Logs under ``mcpclient.config``.
"""
