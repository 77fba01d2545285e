"""URL routes: the chat pages, authentication (log in and out, change or reset a password), the
Django admin, the site icon and the metrics."""

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from boocode import metrics_view
from boocode.security import resets

# How long a password reset link works, as the pages and the email say it.
_reset_hours = {"reset_hours": settings.PASSWORD_RESET_TIMEOUT // 3600}

urlpatterns = [
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico whatever the page links (the admin's pages link none).
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Django's own views and names, in BooCode's templates (templates/registration/).
    path("password/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("password/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path(
        "password/reset/",
        resets.PasswordResetView.as_view(extra_email_context=_reset_hours),
        name="password_reset",
    ),
    path(
        "password/reset/sent/",
        auth_views.PasswordResetDoneView.as_view(extra_context=_reset_hours),
        name="password_reset_done",
    ),
    path(
        "password/reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "password/reset/done/", auth_views.PasswordResetCompleteView.as_view(), name="password_reset_complete"
    ),
    path("oauth/", include("mcpclient.urls")),
    # Prometheus: staff or the metrics token (boocode/metrics_view.py, docs/operations.md).
    path("metrics", metrics_view.metrics, name="metrics"),
    path("", include("boocode.chat.urls")),
]
