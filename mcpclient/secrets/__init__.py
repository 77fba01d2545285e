"""The encrypted secret store and the values of ``${input:ID}`` placeholders.

Owns: the one store of every secret BooCode keeps (``store``: Fernet over the database) and the
``${input:}`` values staff enter (``inputs``). Values never reach a log, a page or mcp.json.
May import: ``mcpclient.core``, ``mcpclient.config`` and the app's models.
"""
