"""Folders in the admin, read-only: files change through the ingest
services (chunking and the search index follow them)."""

from django.contrib import admin

from folders.models import Folder, FolderAttachment, FolderFile
from pattern_site.kernel.web import ReadOnlyMixin


class FolderFileInline(ReadOnlyMixin, admin.TabularInline):
    model = FolderFile
    extra = 0
    fields = ["path", "size", "index_state", "indexed_at"]
    readonly_fields = fields


@admin.register(Folder)
class FolderAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["name", "constellation", "kind", "created_at"]
    inlines = [FolderFileInline]


@admin.register(FolderAttachment)
class FolderAttachmentAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["folder", "agent", "access", "attached_at"]
