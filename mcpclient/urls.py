"""OAuth sign-in URLs (under /oauth/): see mcpclient.views."""

from django.urls import path

from mcpclient import views

app_name = "oauth"

urlpatterns = [
    path("connect/<str:name>/", views.connect, name="connect"),
    path("disconnect/<str:name>/", views.disconnect, name="disconnect"),
    path("callback/", views.callback, name="callback"),
    path("client-metadata.json", views.client_metadata, name="client_metadata"),
]
