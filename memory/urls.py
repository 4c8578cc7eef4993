"""Dashboard pages of the memory app."""

from django.urls import path

from memory import views

app_name = "memory"

urlpatterns = [
    path("blocks/<uuid:block_id>/", views.block_detail, name="block"),
    path("blocks/<uuid:block_id>/edit", views.block_edit, name="block_edit"),
    path(
        "blocks/<uuid:block_id>/configure",
        views.block_configure,
        name="block_configure",
    ),
    path(
        "blocks/<uuid:block_id>/rollback", views.block_rollback, name="block_rollback"
    ),
    path("blocks/<uuid:block_id>/share", views.block_share, name="block_share"),
    path("blocks/<uuid:block_id>/delete", views.block_delete, name="block_delete"),
    path("agents/<int:agent_id>/blocks/new", views.block_create, name="block_create"),
    path("agents/<int:agent_id>/context/", views.agent_context, name="agent_context"),
    path("approvals/", views.approvals_inbox, name="approvals"),
    path(
        "approvals/<int:approval_id>/decide",
        views.approval_decide,
        name="approval_decide",
    ),
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
