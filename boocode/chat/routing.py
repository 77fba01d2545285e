"""Websocket routes of the chat."""

from django.urls import path

from boocode.chat.web.consumers import ChatConsumer

websocket_urlpatterns = [
    path("ws/conversations/<int:conversation_id>/", ChatConsumer.as_asgi()),
]
