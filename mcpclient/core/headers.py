"""The one rule for an HTTP header name that mcp.json or a person may set: an RFC 9110 token.

Both doors use it: a server entry's ``headers`` (:mod:`mcpclient.config.entries`) and a person's
own server (:mod:`mcpclient.runtime.personal`). A name longer than :data:`MAX_HEADER_NAME` is
refused as well: no real header needs more, and it is shown back in errors.
"""

from __future__ import annotations

import re

MAX_HEADER_NAME = 100
HEADER_NAME_RE = re.compile(rf"^[!#$%&'*+.^_`|~0-9A-Za-z-]{{1,{MAX_HEADER_NAME}}}$")
