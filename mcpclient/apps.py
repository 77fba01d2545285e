from django.apps import AppConfig


class McpClientConfig(AppConfig):
    name = "mcpclient"
    verbose_name = "MCP servers"

    def ready(self) -> None:
        """Forget the people's groups read for servers' ``groups`` when the admin changes them, and
        delete a server of one's own's secrets with its row."""
        from mcpclient.runtime import people, personal  # they import models: only once apps are ready

        people.connect_receivers()
        personal.connect_receivers()
