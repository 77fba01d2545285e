"""MCP servers in the Django admin: the top layer of mcpclient.

Owns the admin pages, one module each: the servers (``servers``), their discovered tools
(``tools``), people's own servers (``own_servers``) and the tool definitions' pins (``pins``);
and what the server page is built from: its form (``forms``), its log part (``logs``), who may
use a server (``access``), the changes the admin makes, validated, written through to mcp.json
and applied live (``changes``); and ``mcp_import`` (``importing``). May import every layer below
(runtime, worker, engine, secrets, config, telemetry, core) and the app's models; nothing of
mcpclient imports it, and its modules import one another by their own names, never this face.

Django's admin autodiscovery imports this package: importing the page modules here registers
them with the admin site.
"""

# Each import registers its pages with the admin site.
from mcpclient.admin import own_servers as own_servers
from mcpclient.admin import pins as pins
from mcpclient.admin import servers as servers
from mcpclient.admin import tools as tools
