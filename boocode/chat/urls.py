"""Chat pages, the page's JSON endpoints (docs/protocol.md) and the exports."""

from django.urls import path

from boocode.chat.web import app_views, prompt_views, resource_views, server_views, skill_views, views

app_name = "chat"
urlpatterns = [
    path("", views.index, name="index"),
    path("c/new/", views.new_conversation, name="new"),
    path("c/<int:conversation_id>/", views.conversation, name="conversation"),
    path("c/<int:conversation_id>/rename/", views.rename_conversation, name="rename"),
    path("c/<int:conversation_id>/delete/", views.delete_conversation, name="delete"),
    path("c/<int:conversation_id>/agent/", views.set_agent, name="agent"),
    path("c/<int:conversation_id>/model/", views.set_model, name="model"),
    path("c/<int:conversation_id>/export.md", views.export_markdown, name="export_markdown"),
    path("c/<int:conversation_id>/export.json", views.export_json, name="export_json"),
    path("c/<int:conversation_id>/messages/", views.older_messages, name="older_messages"),
    path("c/<int:conversation_id>/messages/<int:message_id>/", views.whole_message, name="whole_message"),
    path("c/<int:conversation_id>/calls/<int:call_id>/", views.whole_call, name="whole_call"),
    path("c/<int:conversation_id>/calls/<int:call_id>/output/", views.tool_output, name="tool_output"),
    path("c/<int:conversation_id>/calls/<int:call_id>/view/", app_views.call_view, name="call_view"),
    path("apps/views/<str:token>/", app_views.origin_view, name="origin_view"),
    path("api/agents/", views.agents_api, name="agents_api"),
    path("api/models/", views.models_api, name="models_api"),
    path("api/search/", views.search_api, name="search_api"),
    path("api/prompts/", prompt_views.prompts_api, name="prompts_api"),
    path("api/prompts/get/", prompt_views.prompt_get_api, name="prompt_get_api"),
    path("api/resources/", resource_views.resources_api, name="resources_api"),
    path("api/resources/read/", resource_views.read_resource_api, name="read_resource_api"),
    path("api/complete/", resource_views.complete_api, name="complete_api"),
    path("api/skills/", skill_views.skills_api, name="skills_api"),
    path("api/servers/", server_views.servers_api, name="servers_api"),
    path("servers/add/", server_views.add_server, name="own_server_add"),
    path("servers/<int:server_id>/remove/", server_views.remove_server, name="own_server_remove"),
    path("api/skills/read/", skill_views.read_skill_api, name="read_skill_api"),
    path("prefs/theme/", views.set_theme, name="theme"),
]
