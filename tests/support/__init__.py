"""Helpers for the tests: everything a test module shares with another, and nothing else.

A test module (``test_*.py``) and a ``conftest.py`` import helpers from here only, never from
another test module or another folder's conftest; fixtures live in the conftest.py nearest to
every test that uses them (tests/conftest.py for the whole suite). What lives where:

- ``processes``: where things are (``ROOT``, ``PYTHON``, ``TOOLBOX``, ``TEST_COMMANDS``), free
  ports, ``HttpServer`` (a server process on 127.0.0.1), ``toolbox_entry``, ``pids_with``, ``alive``.
  No Django: the ``bench/`` scripts use it too.
- ``hubs``: ``make_config`` (an mcp.json entry parsed like the file), ``stop_process_hub``.
- ``wires``: ``WIRES`` and ``modern_wires``, tests/servers/modern.py on both revisions over
  Streamable HTTP and stdio.
- ``llm``: ``ScriptedLLM``, the real OpenAI-compatible server a test scripts, and its replies.
- ``live``: the one way to run a live Daphne (``live_daphne``), the accounts in its database
  (``make_accounts``, ``create_accounts``), both at once (``live_server``), and
  ``fresh_database`` (PostgreSQL).
- ``accounts``: users of the test process's own database: ``login`` (the one session cookie a
  websocket test uses), ``conversation_of``, ``new_conversation``, ``stored``, ``client_of`` and
  ``web_client`` (Django's test clients logged in, sync and async), ``join`` (groups).
- ``tabs``: ``Tab``, the one websocket tab, in process or against a live Daphne, and
  ``logged_in_tab``, the preamble of a websocket test (a person logged in, a conversation, its tab
  open); ``logged_in`` is the same for an ``async with`` (the tab closed at the block's end).
- ``web``: ``Browserless``, an HTTP client for a live server that is not a browser.
- ``browser``: Chromium, the browser tests' live ``Site`` and its runners, page helpers, axe.
- ``admin``: the admin as a browser drives it (``form_fields``, ``write_config``, ``AsgiAdmin``).
- ``oauth``: the OAuth test server (``OAuthServer``) and a headless OAuth client's parts.
- ``oidc``: a real OpenID provider (``OpenIdProvider``: oidc-provider on Node,
  tests/node/oidc_provider.mjs) and ``Person``, someone signing in through it over HTTP.
- ``otlp``: ``OtlpReceiver``, a real OTLP/HTTP trace receiver (spans decoded with
  opentelemetry-proto), and ``exporting``, tracing turned on in the test process.
- ``scrape``: ``Figures``, what a ``/metrics`` endpoint said (parsed by prometheus_client), and
  ``scrape()``, the test process's own ``/metrics`` read with ``TOKEN``.
- ``html``: ``elements``, the elements a browser would build from rendered HTML.
- ``speed_classes``: the pytest plugin that keeps the speed classes' markers true.
- ``zygote`` and ``pylauncher``: the warm Python every test process forks its Python processes
  from, and the launcher that is ``processes.PYTHON`` (docs/testing.md, "Warm Python processes").
"""
