"""Who signed in through the OpenID provider: one identity (issuer and subject) per linked account."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SsoIdentity(models.Model):
    """A person's identity at the OpenID provider and the BooCode account it signs in to.

    ``(issuer, subject)`` is the identity (OpenID Connect Core: the only pair that is unique and
    never reassigned); once recorded, every sign-in of it reaches ``user``, whatever its email
    says later. ``groups`` lists the groups the sign-ins put the person in (from the groups
    claim): only those are taken away when the claim stops listing them
    (:mod:`boocode.security.sso_accounts`).
    """

    LINKED_BY = [
        ("created", "a new account"),
        ("email", "its verified email"),
        ("subject", "its subject"),
    ]

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identities"
    )
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    linked_by = models.CharField(max_length=16, choices=LINKED_BY)
    groups = models.JSONField(
        default=list, blank=True, help_text="Groups the sign-ins added, from the claim."
    )
    created = models.DateTimeField(auto_now_add=True)
    last_sign_in = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "single sign-on identity"
        verbose_name_plural = "single sign-on identities"
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_unique"),
            # One identity per account and provider: a second one claiming the account is refused.
            models.UniqueConstraint(fields=["issuer", "user"], name="sso_identity_one_per_account"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
