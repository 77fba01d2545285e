"""MCP servers in the Django admin: the top layer of mcpclient.

Owns: the server, tool and own-server admin pages (``servers``), the server form (``forms``),
a server's log part (``logs``), the tool definitions' pins (``pins``), who may use a server
(``access``), the changes the admin makes, validated, written through to mcp.json and applied
live (``changes``), and ``mcp_import`` (``importing``). May import every layer below (runtime,
worker, engine, secrets, config, telemetry, core) and the app's models; nothing of mcpclient
imports it, and its modules import one another by their own names, never this face.

Django's admin autodiscovery imports this package: importing ``servers`` here registers the
pages with the admin site.
"""

from mcpclient.admin import servers as servers  # registers the admin pages
