"""The account an OpenID identity signs in to: linking, new accounts, groups from the claim.

Called once per sign-in, after the ID token was verified (:mod:`boocode.security.oidc`), with its
claims. The rules (docs/teams.md, *Account linking*):

- an identity (issuer, ``sub``) recorded before reaches its account, always;
- a new identity joins an existing account only as ``BOOCODE_OIDC_LINK`` says: ``email``, the
  one account with the claim's ``email`` when ``email_verified`` is true; ``subject``, the
  account whose username is the ``sub``; ``none``, never. An unverified email links nothing:
  the person gets a new account of their own (without that address), never someone else's;
  a staff or superuser account is never linked by email unless ``BOOCODE_OIDC_LINK_STAFF_BY_EMAIL``
  allows it (the sign-in is refused, saying so: whoever controls an address at the provider would
  otherwise hold the administrator's account);
- otherwise a new account, with a username made from ``preferred_username`` (or the email's
  local part), never an existing name; refused when ``BOOCODE_OIDC_CREATE_ACCOUNTS`` is off;
- an account already linked to another identity of the same provider, or inactive, is refused.

Groups (``BOOCODE_OIDC_GROUPS_CLAIM``): the claim's values are Django groups of the same names,
created when missing. At each sign-in the groups a sign-in added and the claim no longer lists
are taken away and the claim's new ones added; a group an administrator gave the person is never
taken away by a sign-in, even when the claim stops listing it (:attr:`SsoIdentity.groups`
records which ones came from the claim).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.db import IntegrityError, transaction
from django.utils import timezone

from boocode.security.models import SsoIdentity

logger = logging.getLogger(__name__)

_GROUP_NAME_MAX = Group._meta.get_field("name").max_length or 150
_NOT_IN_USERNAMES = re.compile(r"[^\w.@+-]")  # Django's username characters are \w . @ + -
_USERNAME_BASE_MAX = 120  # room for "-<n>" under the 150 characters of a username


class SignInRefused(Exception):
    """The identity may not sign in; ``str()`` is the sentence the person reads."""


def email_is_verified(claims: Mapping[str, Any]) -> bool:
    """Whether the provider says it verified the claim's ``email`` (a JSON true; "true" from
    providers that send it as text)."""
    verified = claims.get("email_verified")
    return verified is True or (isinstance(verified, str) and verified.lower() == "true")


def _linked_account(claims: Mapping[str, Any]) -> tuple[Any, str] | tuple[None, None]:
    """The existing account a new identity joins, and how; ``(None, None)`` when none."""
    users = get_user_model().objects
    if settings.OIDC_LINK == "subject":
        user = users.filter(username=claims["sub"]).first()
        return (user, "subject") if user is not None else (None, None)
    if settings.OIDC_LINK == "email" and email_is_verified(claims):
        email = claims.get("email")
        if isinstance(email, str) and email.strip():
            matches = list(users.filter(email__iexact=email.strip())[:2])
            if len(matches) > 1:
                raise SignInRefused(
                    "More than one BooCode account has your email address, so none is chosen: ask an "
                    "administrator to link yours."
                )
            if matches:
                if (matches[0].is_staff or matches[0].is_superuser) and not settings.OIDC_LINK_STAFF_BY_EMAIL:
                    logger.warning(
                        "sign-in refused: %s's verified email is that of staff account %s, which is not "
                        "linked by email (BOOCODE_OIDC_LINK_STAFF_BY_EMAIL is off)",
                        claims["sub"],
                        matches[0].pk,
                    )
                    raise SignInRefused(
                        "Your email address belongs to a BooCode administrator's account, which single "
                        "sign-on does not link by email: sign in to it with its password, or ask an "
                        "administrator to allow it."
                    )
                return matches[0], "email"
    return None, None


def username_for(claims: Mapping[str, Any]) -> str:
    """A free username from the claims: ``preferred_username``, else the email's local part, else
    ``user``; made of the characters Django allows, without leading dots (a name that reads like a
    hidden file, or another person's name behind dots), never the name of an existing account (in
    any case): ``-2``, ``-3``… is added until it is free."""
    email = claims.get("email")
    candidates = [
        claims.get("preferred_username"),
        email.split("@", 1)[0] if isinstance(email, str) else None,
        claims.get("name"),
    ]
    base = "user"
    for candidate in candidates:
        cleaned = _NOT_IN_USERNAMES.sub("", str(candidate or "")).lstrip(".")[:_USERNAME_BASE_MAX]
        if cleaned:
            base = cleaned
            break
    users = get_user_model().objects
    name, number = base, 1
    while users.filter(username__iexact=name).exists():
        number += 1
        name = f"{base}-{number}"
    return name


def _new_account(claims: Mapping[str, Any]) -> Any:
    if not settings.OIDC_CREATE_ACCOUNTS:
        raise SignInRefused(
            f"Your {settings.OIDC_NAME} account has no BooCode account, and new ones are not made here: "
            "ask an administrator."
        )
    email = claims.get("email")
    user = get_user_model()(
        username=username_for(claims),
        # Only an address the provider verified: password resets and linking trust it.
        email=email.strip() if isinstance(email, str) and email_is_verified(claims) else "",
        first_name=str(claims.get("given_name") or "")[:150],
        last_name=str(claims.get("family_name") or "")[:150],
    )
    user.set_unusable_password()
    user.save()
    return user


def claimed_groups(claims: Mapping[str, Any]) -> set[str]:
    """The group names in the groups claim: a list of strings (or one string); others ignored."""
    value = claims.get(settings.OIDC_GROUPS_CLAIM)
    values = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    names = {item.strip() for item in values if isinstance(item, str)}
    return {name for name in names if name and len(name) <= _GROUP_NAME_MAX}


def sync_groups(user: AbstractBaseUser, identity: SsoIdentity, claims: Mapping[str, Any]) -> None:
    """Replace the groups that came from the claim with the claim's groups (the module's rule)."""
    if not settings.OIDC_GROUPS_CLAIM:
        return
    wanted = claimed_groups(claims)
    memberships = user.groups
    current = set(memberships.values_list("name", flat=True))
    recorded = set(identity.groups)
    gone = (recorded - wanted) & current
    if gone:
        memberships.remove(*Group.objects.filter(name__in=gone))
    added = wanted - current
    for name in sorted(added):
        group, _ = Group.objects.get_or_create(name=name)
        memberships.add(group)
    identity.groups = sorted((recorded & wanted & current) | added)


@transaction.atomic
def account_for(issuer: str, claims: Mapping[str, Any]) -> AbstractBaseUser:
    """The account ``claims`` (a verified ID token's, ``sub`` included) signs in to, its groups
    brought up to date; ``SignInRefused`` says why not."""
    subject = str(claims["sub"])
    identity = SsoIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
    if identity is None:
        user, linked_by = _linked_account(claims)
        if user is None:
            try:
                with transaction.atomic():
                    user, linked_by = _new_account(claims), "created"
            except IntegrityError:  # its username taken by another account made just now
                raise SignInRefused("Another account was being made at the same time: try again.") from None
        elif SsoIdentity.objects.filter(issuer=issuer, user=user).exists():
            logger.warning("sign-in refused: account %s is linked to another identity of %s", user.pk, issuer)
            raise SignInRefused(
                "The BooCode account for your address is linked to another identity of this provider: "
                "ask an administrator."
            )
        try:
            with transaction.atomic():
                identity = SsoIdentity.objects.create(
                    user=user, issuer=issuer, subject=subject, linked_by=linked_by
                )
        except IntegrityError:  # the same identity's first sign-in in another tab, just now
            raise SignInRefused(
                "Another sign-in of yours was being completed at the same time: try again."
            ) from None
        logger.info("single sign-on: %s linked to account %s (%s)", subject, user.pk, linked_by)
    user = identity.user
    if not user.is_active:
        raise SignInRefused("Your BooCode account is deactivated: ask an administrator.")
    sync_groups(user, identity, claims)
    identity.last_sign_in = timezone.now()
    identity.save(update_fields=["groups", "last_sign_in"])
    return user
