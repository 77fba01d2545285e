"""URL routes: the chat pages, authentication, the Django admin and the site icon."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico whatever the page links (the admin's pages link none).
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("oauth/", include("mcpclient.urls")),
    path("", include("boocode.chat.urls")),
]
