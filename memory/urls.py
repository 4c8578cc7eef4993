"""Dashboard pages of the memory app."""

from django.urls import path

from memory import views as context_views
from memory.blocks import views as block_views
from memory.longterm import views as longterm_views

app_name = "memory"

urlpatterns = [
    path("blocks/<uuid:block_id>/", block_views.block_detail_page, name="block"),
    path(
        "blocks/<uuid:block_id>/edit", block_views.edit_block_action, name="block_edit"
    ),
    path(
        "blocks/<uuid:block_id>/configure",
        block_views.configure_block_action,
        name="block_configure",
    ),
    path(
        "blocks/<uuid:block_id>/rollback",
        block_views.rollback_block_action,
        name="block_rollback",
    ),
    path(
        "blocks/<uuid:block_id>/versions/<int:number>/",
        block_views.block_version_fragment,
        name="block_version",
    ),
    path(
        "blocks/<uuid:block_id>/blame/",
        block_views.block_blame_fragment,
        name="block_blame",
    ),
    path(
        "blocks/<uuid:block_id>/compare/",
        block_views.block_compare_fragment,
        name="block_compare",
    ),
    path(
        "blocks/<uuid:block_id>/share",
        block_views.share_block_action,
        name="block_share",
    ),
    path(
        "blocks/<uuid:block_id>/delete",
        block_views.delete_block_action,
        name="block_delete",
    ),
    path(
        "agents/<int:agent_id>/blocks/new",
        block_views.create_block_action,
        name="block_create",
    ),
    path(
        "agents/<int:agent_id>/context/",
        context_views.agent_context_page,
        name="agent_context",
    ),
    path("approvals/", block_views.approvals_inbox_page, name="approvals"),
    path(
        "approvals/<int:approval_id>/decide",
        block_views.decide_approval_action,
        name="approval_decide",
    ),
    path("search/", longterm_views.search_page, name="search"),
    path(
        "agents/<int:agent_id>/archival/",
        longterm_views.archival_browser_page,
        name="archival",
    ),
    path(
        "archival/<int:entry_id>/edit/",
        longterm_views.edit_archival_entry_page,
        name="archival-edit",
    ),
    path(
        "archival/<int:entry_id>/delete/",
        longterm_views.delete_archival_entry_action,
        name="archival-delete",
    ),
    path(
        "archival/<int:entry_id>/restore/",
        longterm_views.restore_archival_entry_action,
        name="archival-restore",
    ),
    path(
        "agents/<int:agent_id>/conversations/",
        longterm_views.conversation_list_page,
        name="conversations",
    ),
    path(
        "conversations/<int:conversation_id>/",
        longterm_views.conversation_detail_page,
        name="conversation",
    ),
]
