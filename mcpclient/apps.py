from django.apps import AppConfig


class McpClientConfig(AppConfig):
    name = "mcpclient"
    verbose_name = "MCP servers"

    def ready(self) -> None:
        """Forget the people's groups read for servers' ``groups`` when the admin changes them."""
        from mcpclient.runtime import people  # imports models: only once apps are ready

        people.connect_receivers()
