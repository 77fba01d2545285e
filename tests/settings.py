"""The settings every test process uses: BooCode's own, with a fast password hasher.

pytest-django exports this module's name (pyproject.toml), so the Daphnes, hub workers and
``manage.py`` runs the tests start use it too: a password hashed in one process checks in the
other. The production hasher (PBKDF2, ~0.8 s a hash here) is the point of production; in tests
it only costs time at every login. Tests of the settings themselves load ``boocode.settings``.

Tool search ranks lexically unless a test turns the embedding model on
(``settings.TOOL_SEARCH_SEMANTIC = True``, tests/chat/test_tool_search.py): a turn over hundreds
of generated tools would otherwise embed them all in the background, for nothing.
"""

from boocode.settings import *  # noqa: F403

PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    # still checks a hash made by a process that loaded boocode.settings (tests of settings)
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]

TOOL_SEARCH_SEMANTIC = False
