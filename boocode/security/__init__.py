"""Web-layer hardening and the ways in: websocket origins, sockets bound to sessions, login
throttling, headers, single sign-on with OpenID Connect (``oidc``, ``sso_accounts``, ``signin``).

A small Django app (``boocode.security``) so its signal receivers are connected in every
process, the web server and management commands alike (see :mod:`boocode.security.apps`).
May import: ``mcpclient`` (the people's groups, the secret store) and Django; never the chat or
the tools (the product's layers contract).
"""
