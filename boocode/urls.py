"""URL routes: the chat pages, authentication (log in and out, single sign-on, change or reset a
password), the Django admin, the site icon and the metrics."""

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from boocode import metrics_view
from boocode.security import resets, signin

# How long a password reset link works, as the pages and the email say it.
_reset_hours = {"reset_hours": settings.PASSWORD_RESET_TIMEOUT // 3600}

# The password pages answer only while local accounts' passwords are on (BOOCODE_LOCAL_LOGIN).
_local = signin.local_login_only

urlpatterns = [
    # Before the admin's own: its login leads to the login page once passwords are off.
    path("admin/login/", signin.admin_login),
    path("admin/password_change/", signin.admin_password_change),
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico whatever the page links (the admin's pages link none).
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("login/", signin.LoginView.as_view(), name="login"),
    # Single sign-on with OpenID Connect (docs/teams.md): to the provider, and back.
    path("login/sso/", signin.sso_login, name="sso_login"),
    path("login/sso/callback/", signin.sso_callback, name="sso_callback"),
    path("logout/", signin.LogoutView.as_view(), name="logout"),
    # Django's own views and names, in BooCode's templates (templates/registration/).
    path("password/", _local(auth_views.PasswordChangeView.as_view()), name="password_change"),
    path("password/done/", _local(auth_views.PasswordChangeDoneView.as_view()), name="password_change_done"),
    path(
        "password/reset/",
        _local(resets.PasswordResetView.as_view(extra_email_context=_reset_hours)),
        name="password_reset",
    ),
    path(
        "password/reset/sent/",
        _local(auth_views.PasswordResetDoneView.as_view(extra_context=_reset_hours)),
        name="password_reset_done",
    ),
    path(
        "password/reset/<uidb64>/<token>/",
        _local(auth_views.PasswordResetConfirmView.as_view()),
        name="password_reset_confirm",
    ),
    path(
        "password/reset/done/",
        _local(auth_views.PasswordResetCompleteView.as_view()),
        name="password_reset_complete",
    ),
    path("oauth/", include("mcpclient.urls")),
    # Prometheus: staff or the metrics token (boocode/metrics_view.py, docs/operations.md).
    path("metrics", metrics_view.metrics, name="metrics"),
    path("", include("boocode.chat.urls")),
]
