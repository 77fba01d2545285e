from django.apps import AppConfig


class McpClientConfig(AppConfig):
    name = "mcpclient"
    verbose_name = "MCP servers"
