"""Memory in the admin: every model, read-only.

Blocks, their history and long-term memory change only through their
services (Loro documents, search indexes, permission checks); the admin
shows them for inspection, with a link to the dashboard page that edits a
block.  Retrieval settings are the one editable model: plain per-constellation
numbers with no index or document behind them.
"""

from django import forms
from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from memory.longterm.compose import limits_parse
from memory.models import (
    ArchivalEntry,
    ArchivalRole,
    BlockApproval,
    BlockAttachment,
    BlockUpdate,
    ConsolidationRun,
    ContextConfig,
    Conversation,
    MemoryBlock,
    Message,
    RetrievalConfig,
    ScratchpadEntry,
)
from pattern_site.kernel.errors import ApplicationError
from pattern_site.kernel.web import ReadOnlyMixin


class ReadOnlyInline(ReadOnlyMixin, admin.TabularInline):
    extra = 0
    show_change_link = False


class BlockUpdateInline(ReadOnlyInline):
    """The block's history, newest first, without the update bytes."""

    model = BlockUpdate
    fields = ["id", "created_at", "actor_kind", "actor_name", "summary", "size"]
    readonly_fields = fields
    ordering = ["-id"]
    verbose_name_plural = "history (newest first)"


class BlockAttachmentInline(ReadOnlyInline):
    model = BlockAttachment
    fields = ["agent", "access", "attached_at"]
    readonly_fields = fields


@admin.register(MemoryBlock)
class MemoryBlockAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = [
        "label",
        "owner",
        "constellation",
        "block_type",
        "permission",
        "pinned",
        "size",
        "char_limit",
        "updated_at",
    ]
    list_filter = ["block_type", "permission", "pinned", "constellation"]
    search_fields = ["label", "description", "rendered", "owner__name"]
    list_select_related = ["owner", "constellation"]
    exclude = ["snapshot_upto", "log_count", "log_bytes", "version"]
    readonly_fields = ["dashboard_link"]
    inlines = [BlockAttachmentInline, BlockUpdateInline]

    @admin.display(description="Edit")
    def dashboard_link(self, block: MemoryBlock) -> str:
        url = reverse("memory:block", args=[block.pk])
        return format_html('<a href="{}">Open in the dashboard</a>', url)


@admin.register(BlockApproval)
class BlockApprovalAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["block", "agent", "summary", "status", "decided_by", "created_at"]
    list_filter = ["status"]
    search_fields = ["summary", "block__label", "agent__name"]
    list_select_related = ["block", "agent"]


@admin.register(ArchivalEntry)
class ArchivalEntryAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = [
        "short_content",
        "agent",
        "label",
        "source",
        "importance",
        "embedding_state",
        "created_at",
    ]
    list_filter = [
        "source",
        "tier",
        "lifetime",
        "superseded_reason",
        "embedding_state",
        "constellation",
    ]
    search_fields = ["content", "label", "agent__name"]
    list_select_related = ["agent"]
    exclude = ["content_hash", "embedded_hash"]

    @admin.display(description="content")
    def short_content(self, entry: ArchivalEntry) -> str:
        return entry.content[:80]


class MessageInline(ReadOnlyInline):
    model = Message
    fields = ["position", "role", "author", "content", "created_at"]
    readonly_fields = fields
    ordering = ["position"]


class ScratchpadInline(ReadOnlyInline):
    """The conversation's working notes (the agent writes them)."""

    model = ScratchpadEntry
    fields = ["key", "value", "updated_at"]
    readonly_fields = fields
    verbose_name_plural = "working notes (scratchpad)"


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["title", "agent", "status", "message_count", "started_at"]
    list_filter = ["status", "constellation"]
    search_fields = ["title", "agent__name"]
    list_select_related = ["agent"]
    inlines = [ScratchpadInline, MessageInline]


@admin.register(Message)
class MessageAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["conversation", "position", "role", "author", "created_at"]
    list_filter = ["role", "embedding_state"]
    search_fields = ["content", "author"]
    list_select_related = ["conversation"]
    exclude = ["content_hash", "embedded_hash"]


@admin.register(RetrievalConfig)
class RetrievalConfigAdmin(admin.ModelAdmin):
    list_display = ["constellation"]


class ContextConfigForm(forms.ModelForm):
    class Meta:
        model = ContextConfig
        fields = [
            "constellation",
            "model_overrides",
            "compression",
            "keep_recent",
            "chunk_size",
            "summarization_model",
            "max_messages_cap",
        ]

    def clean_model_overrides(self) -> dict:
        overrides = self.cleaned_data["model_overrides"]
        if not isinstance(overrides, dict):
            raise forms.ValidationError('give {"model prefix": {limits}}')
        for prefix, raw in overrides.items():
            try:
                limits_parse(raw)
            except ApplicationError as exc:
                raise forms.ValidationError(f"{prefix}: {exc.message}") from exc
        return overrides


@admin.register(ArchivalRole)
class ArchivalRoleAdmin(ReadOnlyMixin, admin.ModelAdmin):
    """Who may read every agent's observations (given by the partner)."""

    list_display = ["agent", "role", "granted_at"]
    list_filter = ["role"]


@admin.register(ConsolidationRun)
class ConsolidationRunAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = [
        "finished_at",
        "constellation",
        "agent",
        "decided_by",
        "promoted",
        "merged",
        "pruned",
        "capped",
    ]
    list_filter = ["decided_by"]


@admin.register(ContextConfig)
class ContextConfigAdmin(admin.ModelAdmin):
    form = ContextConfigForm
    list_display = ["constellation", "compression", "max_messages_cap"]
