"""Dashboard pages of the memory app."""

from django.urls import path

from memory import views

app_name = "memory"

urlpatterns: list = [
    # --- long-term memory ---
    path("search/", views.search_page, name="search"),
    path("agents/<int:agent_id>/archival/", views.archival_browser, name="archival"),
    path("archival/<int:entry_id>/edit/", views.archival_edit, name="archival-edit"),
    path(
        "archival/<int:entry_id>/delete/",
        views.archival_delete,
        name="archival-delete",
    ),
    path(
        "agents/<int:agent_id>/conversations/",
        views.conversation_list,
        name="conversations",
    ),
    path(
        "conversations/<int:conversation_id>/",
        views.conversation_detail,
        name="conversation",
    ),
]
