"""``manage.py secrets_rotate``: re-encrypt every stored secret with the first key.

Rotation: put a new key first in BOOCODE_SECRETS_KEY and keep the old one after it, run this
command, then drop the old key. ``--generate-key`` prints a new key and changes nothing.
"""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcpclient.management.base import require_migrated_database
from mcpclient.secrets.store import KEY_VARIABLE, SecretStoreError, generate_key, rotate_key


class Command(BaseCommand):
    help = (
        f"Re-encrypt every stored secret with the first key of {KEY_VARIABLE} (new key first, old "
        "key after it; drop the old key afterwards). --generate-key prints a new key."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--generate-key", action="store_true", help="print a new random key and change nothing"
        )

    def handle(self, *args, **options) -> None:
        if options["generate_key"]:
            self.stdout.write(generate_key())
            return
        require_migrated_database()
        try:
            count = rotate_key()
        except SecretStoreError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"re-encrypted {count} stored secret{'s' if count != 1 else ''} with the first key")
        if len(settings.SECRETS_KEYS) > 1:
            self.stdout.write(f"the other keys of {KEY_VARIABLE} are no longer needed: remove them")
