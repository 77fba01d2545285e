"""Web-layer hardening: websocket origins, sockets bound to sessions, login throttling, headers.

A small Django app (``boocode.security``) so its signal receivers are connected in every
process, the web server and management commands alike (see :mod:`boocode.security.apps`).
"""
