#!/usr/bin/env python
"""Django's command-line utility for BooCode."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boocode.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A bad setting is named by its message (boocode/env.py): one line, not a traceback.
        if "--traceback" in sys.argv:
            raise
        sys.exit(f"ImproperlyConfigured: {exc}")


if __name__ == "__main__":
    main()
