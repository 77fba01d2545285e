from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "boocode.chat"
    label = "chat"
    verbose_name = "Chat"
