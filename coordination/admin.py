from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from coordination.groups.models import (
    AgentGroup,
    AgentLoopConfig,
    AgentToolCall,
    AgentTurn,
    GroupMembership,
    GroupRun,
)
from coordination.work.models import CoordinationState, HandoffNote, Task
from memory.context import tool_rule_parse
from pattern_site.kernel.agents.models import Agent, AgentToken, Constellation
from pattern_site.kernel.agents.services import agent_token_issue, agent_token_revoke
from pattern_site.kernel.errors import ApplicationError
from pattern_site.kernel.web import ReadOnlyMixin


class AgentInline(admin.TabularInline):
    model = Agent
    extra = 0
    fields = [
        "name",
        "role",
        "model_name",
        "answered_by_llm",
        "is_active",
        "last_active_at",
    ]
    readonly_fields = ["last_active_at"]
    show_change_link = True


@admin.register(Constellation)
class ConstellationAdmin(admin.ModelAdmin):
    list_display = ["name", "partner", "created_at"]
    search_fields = ["name", "partner__username"]
    filter_horizontal = ["members"]
    inlines = [AgentInline]


class AgentTokenInline(admin.TabularInline):
    model = AgentToken
    extra = 0
    can_delete = False
    fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "constellation", "role", "is_active", "last_active_at"]
    list_filter = ["constellation", "is_active"]
    search_fields = ["name", "role"]
    readonly_fields = ["last_active_at", "created_at"]
    inlines = [AgentTokenInline]
    actions = ["rotate_tokens", "revoke_tokens"]

    @admin.action(description="Rotate API token (shows the new token once)")
    def rotate_tokens(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        for agent in queryset:
            issued = agent_token_issue(agent=agent)
            self.message_user(
                request,
                f"New token for {agent.name}: {issued.raw}"
                " (copy it now; it is not shown again)",
                messages.WARNING,
            )

    @admin.action(description="Revoke API tokens")
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        revoked = sum(agent_token_revoke(agent=agent) for agent in queryset)
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    """Tokens for inspection; issuing and revoking go through the agent's
    actions (the raw token is shown once, by the service that makes it)."""

    list_display = ["prefix", "agent", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["agent__constellation"]
    search_fields = ["prefix", "agent__name"]
    list_select_related = ["agent"]
    readonly_fields = ["agent", "prefix", "created_at", "last_used_at", "revoked_at"]
    exclude = ["key_hash"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class GroupMembershipInline(admin.TabularInline):
    model = GroupMembership
    extra = 0
    can_delete = False
    fields = ["agent", "role", "domain", "capabilities"]
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(AgentGroup)
class AgentGroupAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["name", "constellation", "pattern"]
    list_filter = ["pattern"]
    search_fields = ["name"]
    inlines = [GroupMembershipInline]


@admin.register(GroupRun)
class GroupRunAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["id", "group", "status", "started_at"]
    list_filter = ["status"]


@admin.register(Task)
class TaskAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["id", "title", "constellation", "status", "assignee", "priority"]
    list_filter = ["status"]
    search_fields = ["title"]


@admin.register(HandoffNote)
class HandoffNoteAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["id", "from_agent", "to_agent", "created_at", "read_at"]


@admin.register(CoordinationState)
class CoordinationStateAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["key", "constellation", "version", "updated_at"]


class AgentLoopConfigForm(forms.ModelForm):
    class Meta:
        model = AgentLoopConfig
        fields = ["agent", "tool_rules", "provider", "max_steps", "timeout_seconds"]

    def clean_tool_rules(self) -> list:
        rules = self.cleaned_data["tool_rules"]
        if not isinstance(rules, list):
            raise forms.ValidationError('give [{"tool", "kind", "value"}, ...]')
        try:
            for raw in rules:
                tool_rule_parse(raw if isinstance(raw, dict) else {})
        except ApplicationError as exc:
            raise forms.ValidationError(exc.message) from exc
        return rules


@admin.register(AgentLoopConfig)
class AgentLoopConfigAdmin(admin.ModelAdmin):
    form = AgentLoopConfigForm
    list_display = ["agent", "provider", "max_steps", "timeout_seconds"]


class AgentToolCallInline(ReadOnlyMixin, admin.TabularInline):
    model = AgentToolCall
    extra = 0
    fields = ["step", "call_id", "name", "status", "ok", "result"]
    readonly_fields = fields


@admin.register(AgentTurn)
class AgentTurnAdmin(ReadOnlyMixin, admin.ModelAdmin):
    """What an agent's turns did, call by call (read-only: the loop writes
    them)."""

    list_display = ["id", "agent", "status", "steps", "exit", "started_at"]
    list_filter = ["status", "exit"]
    inlines = [AgentToolCallInline]
