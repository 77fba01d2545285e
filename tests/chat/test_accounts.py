"""People's own passwords: change one while signed in, reset a forgotten one by email.

Django's views in BooCode's templates: each field carries its own error, the reset does not say
whether an address has an account, and a reset link works once.
"""

from __future__ import annotations

import os
import re
import subprocess
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.urls import reverse

from tests.support.processes import PYTHON, ROOT

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_reset_counted() -> None:
    """Each test starts with no reset request counted (boocode.security.resets)."""
    from django.core.cache import cache

    cache.clear()


OLD, NEW = "an old sturdy passphrase", "a new sturdy passphrase"


def person(username: str = "alice", email: str = "alice@example.org") -> Client:
    user = get_user_model().objects.create_user(username, email, OLD)
    client = Client()
    client.force_login(user)
    return client


def signs_in(username: str, password: str) -> bool:
    return Client().login(username=username, password=password)


def test_the_sidebar_and_the_login_page_lead_to_the_password_pages():
    page = person().get("/").content.decode()
    assert f'href="{reverse("password_change")}"' in page
    login = Client().get(reverse("login")).content.decode()
    assert f'href="{reverse("password_reset")}"' in login and "Forgot your password?" in login


def test_a_person_changes_their_password_and_stays_signed_in():
    client = person()
    page = client.get(reverse("password_change"))
    assert page.status_code == 200 and 'autocomplete="current-password"' in page.content.decode()
    done = client.post(
        reverse("password_change"),
        {"old_password": OLD, "new_password1": NEW, "new_password2": NEW},
        follow=True,
    )
    assert done.redirect_chain[-1][0] == reverse("password_change_done")
    assert "Your password is changed" in done.content.decode()
    assert client.get("/").status_code == 200  # this session holds
    assert signs_in("alice", NEW) and not signs_in("alice", OLD)


def test_each_wrong_field_shows_its_own_error_at_the_field():
    client = person()
    page = client.post(
        reverse("password_change"),
        {"old_password": "wrong", "new_password1": "short", "new_password2": "other"},
    ).content.decode()
    invalid = re.findall(r'<div class="field field-invalid">\s*<label for="(id_\w+)"', page)
    assert invalid == ["id_old_password", "id_new_password2"]
    old = page.split('for="id_old_password"')[1].split('class="field')[0]
    assert 'aria-invalid="true"' in old and "Your old password was entered incorrectly" in old
    assert "The two password fields" in page.split('for="id_new_password2"')[1]
    assert signs_in("alice", OLD)  # nothing changed


def test_the_password_pages_need_a_signed_in_person_except_the_reset():
    assert Client().get(reverse("password_change")).status_code == 302
    assert Client().get(reverse("password_reset")).status_code == 200


def test_a_forgotten_password_is_reset_by_a_link_that_works_once(settings):
    person()
    anonymous = Client()
    sent = anonymous.post(reverse("password_reset"), {"email": "alice@example.org"}, follow=True)
    assert sent.redirect_chain[-1][0] == reverse("password_reset_done")
    assert "for 24 hours" in sent.content.decode()
    [email] = mail.outbox
    assert email.to == ["alice@example.org"] and email.subject == "Choose a new BooCode password"
    assert '"alice"' in email.body and "for 24 hours" in email.body
    [link] = re.findall(r"http://testserver(/password/reset/\S+/)", email.body)

    form = anonymous.get(link, follow=True)  # Django moves the token out of the URL into the session
    assert form.status_code == 200 and 'name="new_password1"' in form.content.decode()
    done = anonymous.post(
        form.redirect_chain[-1][0], {"new_password1": NEW, "new_password2": NEW}, follow=True
    )
    assert done.redirect_chain[-1][0] == reverse("password_reset_complete")
    assert signs_in("alice", NEW) and not signs_in("alice", OLD)

    again = Client().get(link, follow=True).content.decode()
    assert "This link cannot be used" in again and 'name="new_password1"' not in again


def test_an_unknown_address_gets_the_same_answer_and_no_email():
    person()
    answer = Client().post(reverse("password_reset"), {"email": "nobody@example.org"}, follow=True)
    assert answer.redirect_chain[-1][0] == reverse("password_reset_done") and mail.outbox == []


@pytest.mark.processes
def test_without_an_smtp_host_the_email_is_printed_for_the_administrator(tmp_path):
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "from django.core.mail import send_mail; m = s.MAILERS['default']; "
        "print(m['BACKEND'].rsplit('.', 2)[1], m.get('OPTIONS', {}).get('port')); "
        "'OPTIONS' in m or send_mail('Subject', 'the link is here', None, ['alice@example.org'])"
    )
    env = {**os.environ, "BOOCODE_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "boocode.settings"}
    env.pop("BOOCODE_EMAIL_HOST", None)
    printed = subprocess.run([PYTHON, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert printed.stdout.startswith("console_mail None\n"), printed.stderr
    assert "To: alice@example.org" in printed.stdout and "the link is here" in printed.stdout
    env |= {"BOOCODE_EMAIL_HOST": "smtp.example.org", "BOOCODE_EMAIL_PORT": "2525"}
    smtp = subprocess.run([PYTHON, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert smtp.stdout == "smtp 2525\n", smtp.stderr


def test_a_printed_reset_email_has_its_link_whole_on_one_line(settings):
    # What an administrator copies from the server's output, without an SMTP host.
    printed = StringIO()
    backend = "boocode.security.console_mail.EmailBackend"  # the one settings.py picks without a host
    settings.MAILERS = {"default": {"BACKEND": backend, "OPTIONS": {"stream": printed}}}
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "boocode.chat.example.org"]
    person(email="alice@example.org")
    anonymous = Client(HTTP_HOST="boocode.chat.example.org")
    anonymous.post(reverse("password_reset"), {"email": "alice@example.org"})
    output = printed.getvalue()
    assert "Subject: Choose a new BooCode password" in output and "To: alice@example.org" in output
    assert "Content-Transfer-Encoding" not in output and "=3D" not in output and "=\n" not in output
    [link] = re.findall(r"^http://boocode\.chat\.example\.org(/password/reset/\S+/)$", output, re.MULTILINE)
    assert len(f"http://boocode.chat.example.org{link}") > 76  # longer than a quoted-printable line
    form = anonymous.get(link, follow=True)
    assert form.status_code == 200 and 'name="new_password1"' in form.content.decode()


def test_reset_requests_are_limited_per_client_and_per_address():
    from boocode.security.resets import RESETS_PER_HOUR

    person()
    get_user_model().objects.create_user("bob", "bob@example.org", OLD)
    anonymous = Client(REMOTE_ADDR="192.0.2.7")
    for _ in range(RESETS_PER_HOUR + 2):
        answer = anonymous.post(reverse("password_reset"), {"email": "alice@example.org"}, follow=True)
        assert answer.redirect_chain[-1][0] == reverse("password_reset_done")  # the same answer each time
    assert [m.to for m in mail.outbox] == [["alice@example.org"]] * RESETS_PER_HOUR
    # That client is over its limit for any address; another client, for alice's, too.
    anonymous.post(reverse("password_reset"), {"email": "bob@example.org"})
    Client(REMOTE_ADDR="198.51.100.9").post(reverse("password_reset"), {"email": "alice@example.org"})
    assert len(mail.outbox) == RESETS_PER_HOUR
    # Bob from elsewhere is not held back by either.
    Client(REMOTE_ADDR="198.51.100.10").post(reverse("password_reset"), {"email": "bob@example.org"})
    assert mail.outbox[-1].to == ["bob@example.org"]


def test_a_printed_email_shows_each_part_decoded_and_names_attachments():
    from django.core.mail import EmailMultiAlternatives

    from boocode.security.console_mail import EmailBackend

    link = "http://127.0.0.1:8000/password/reset/MQ/" + "ab12cd-" * 12 + "/"
    message = EmailMultiAlternatives(
        "Un mot de passe é", f"Ouvrez :\n\n{link}\n\né=x", None, ["a@example.org"]
    )
    message.attach_alternative(f"<p>{link}</p>", "text/html")
    message.attach("notes.txt", "hello", "text/plain")
    printed = StringIO()
    EmailBackend(stream=printed).send_messages([message])
    output = printed.getvalue()
    assert "Subject: Un mot de passe é" in output and "To: a@example.org" in output
    assert f"\n{link}\n" in output and f"<p>{link}</p>" in output and "\né=x\n" in output
    assert "(attachment notes.txt, " in output and "hello" not in output
    assert output.endswith("\n" + "-" * 79 + "\n")
