"""Websocket routes of the chat."""

websocket_urlpatterns: list = []
