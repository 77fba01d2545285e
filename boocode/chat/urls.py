"""Chat pages."""

from django.urls import path

from boocode.chat import views

app_name = "chat"
urlpatterns = [
    path("", views.index, name="index"),
    path("c/new/", views.new_conversation, name="new"),
    path("c/<int:conversation_id>/", views.conversation, name="conversation"),
    path("c/<int:conversation_id>/rename/", views.rename_conversation, name="rename"),
    path("c/<int:conversation_id>/delete/", views.delete_conversation, name="delete"),
    path("c/<int:conversation_id>/agent/", views.set_agent, name="agent"),
    path("c/<int:conversation_id>/calls/<int:call_id>/output/", views.tool_output, name="tool_output"),
]
