"""Dashboard forms: one configuration form per coordination pattern.

Each pattern form shows its configuration as fields (agents as choices
among the group's members) and turns the cleaned data back into the
configuration the service validates; pipeline stages and sleeptime
triggers are formsets.  The pattern's own validation stays the one judge:
a form only parses, and the service's error is shown when it refuses.
"""

from typing import Any

from django import forms

from coordination.groups.models import AgentGroup, CoordinationPattern, MemberRole

SECONDS = "seconds"


class GroupCreateForm(forms.Form):
    name = forms.CharField(max_length=100)
    pattern = forms.ChoiceField(choices=CoordinationPattern.choices)
    description = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2})
    )


class MemberAddForm(forms.Form):
    agent = forms.TypedChoiceField(coerce=int)
    role = forms.ChoiceField(choices=MemberRole.choices)
    domain = forms.CharField(
        required=False, max_length=100, help_text="Specialists only."
    )
    capabilities = forms.CharField(
        required=False, help_text="Comma separated, e.g. schedules, estimates."
    )

    def __init__(self, *args: Any, agents: list[tuple[int, str]], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = agents

    def capability_list(self) -> list[str]:
        return [c.strip() for c in self.cleaned_data["capabilities"].split(",")]


class RouteForm(forms.Form):
    message = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}))
    options = forms.CharField(
        required=False, help_text="Voting groups: choices, comma separated."
    )

    def option_list(self) -> list[str]:
        return [o.strip() for o in self.cleaned_data["options"].split(",") if o.strip()]


class PatternForm(forms.Form):
    """Base: ``members`` are (agent id, name) pairs of the group."""

    pattern: str

    def __init__(
        self, *args: Any, members: list[tuple[int, str]], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.members = members

    @classmethod
    def initial_from(cls, config: dict[str, Any]) -> dict[str, Any]:
        return dict(config)

    def to_config(self) -> dict[str, Any]:
        return dict(self.cleaned_data)

    def formsets(self) -> list[forms.BaseFormSet]:
        return []

    def all_valid(self) -> bool:
        return self.is_valid() and all(f.is_valid() for f in self.formsets())


def member_choice(members: list[tuple[int, str]], *, blank: str = "") -> list:
    choices = [(str(pk), name) for pk, name in members]
    return [("", blank), *choices] if blank else choices


class RoundRobinForm(PatternForm):
    pattern = "round_robin"
    skip_unavailable = forms.BooleanField(
        required=False, initial=True, help_text="Pass an inactive member's turn on."
    )


class DynamicForm(PatternForm):
    pattern = "dynamic"
    selector = forms.ChoiceField(
        choices=[
            ("capability", "Capability: best match of the message"),
            ("load_balancing", "Load balancing: least recently used"),
            ("random", "Random"),
            ("supervisor", "Supervisor: the supervisor member chooses"),
        ]
    )
    preferred_domain = forms.CharField(required=False, max_length=100)
    use_embeddings = forms.BooleanField(
        required=False, help_text="Match by embedding when the model is loaded."
    )


class SupervisorForm(PatternForm):
    pattern = "supervisor"
    leader_id = forms.TypedChoiceField(
        coerce=int, required=False, empty_value=None, label="Leader"
    )
    max_delegations_per_agent = forms.IntegerField(
        min_value=0, initial=3, help_text="Per run; 0 for no limit."
    )
    delegation_strategy = forms.ChoiceField(
        choices=[
            ("capability", "Capability"),
            ("round_robin", "Round robin"),
            ("load_balancing", "Load balancing"),
            ("random", "Random"),
        ]
    )
    fallback_behavior = forms.ChoiceField(
        choices=[
            ("handle_self", "Leader handles it itself"),
            ("fail", "Fail the run"),
        ],
        help_text="When a delegation cannot be made.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["leader_id"].choices = member_choice(
            self.members, blank="First supervisor member"
        )


class VotingForm(PatternForm):
    pattern = "voting"
    quorum = forms.IntegerField(min_value=1, initial=2)
    voting_timeout = forms.FloatField(min_value=1, initial=30, label="Timeout (s)")
    tie_breaker = forms.ChoiceField(
        choices=[
            ("random", "Random"),
            ("first_vote", "First vote"),
            ("supervisor", "Supervisor's vote"),
            ("none", "None: the run fails"),
        ]
    )
    weight_by_expertise = forms.BooleanField(required=False)


class StageForm(forms.Form):
    name = forms.CharField(max_length=100)
    agent_ids = forms.TypedMultipleChoiceField(coerce=int, label="Agents")
    timeout = forms.FloatField(min_value=1, initial=60, label="Timeout (s)")
    on_failure = forms.ChoiceField(
        choices=[("abort", "Abort"), ("skip", "Skip"), ("retry", "Retry")]
    )
    max_attempts = forms.IntegerField(min_value=1, max_value=10, initial=2)

    def __init__(self, *args: Any, members: list[tuple[int, str]], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["agent_ids"].choices = member_choice(members)
        self.fields["agent_ids"].widget.attrs["size"] = min(4, max(2, len(members)))


StageFormSet = forms.formset_factory(StageForm, extra=0, min_num=1, can_delete=True)


class PipelineForm(PatternForm):
    pattern = "pipeline"
    parallel_stages = forms.BooleanField(required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        initial = kwargs.get("initial") or {}
        super().__init__(*args, **kwargs)
        self.stages = StageFormSet(
            self.data or None,
            initial=initial.get("stages", []),
            prefix=f"{self.prefix}-stages",
            form_kwargs={"members": self.members},
        )

    def formsets(self) -> list[forms.BaseFormSet]:
        return [self.stages]

    def to_config(self) -> dict[str, Any]:
        stages = [
            {k: v for k, v in form.cleaned_data.items() if k != "DELETE"}
            for form in self.stages.forms
            if form.cleaned_data and not form.cleaned_data.get("DELETE")
        ]
        return {**self.cleaned_data, "stages": stages}


TRIGGER_KINDS = [
    ("time_elapsed", "Time elapsed"),
    ("constellation_activity", "Constellation activity"),
    ("threshold_exceeded", "Threshold exceeded"),
]
PRIORITIES = [(p, p.title()) for p in ("low", "medium", "high", "critical")]
CONDITION_FIELDS = {
    "time_elapsed": ("duration",),
    "constellation_activity": ("message_threshold", "time_threshold"),
    "threshold_exceeded": ("metric", "threshold"),
}


class TriggerForm(forms.Form):
    name = forms.CharField(max_length=100)
    priority = forms.ChoiceField(choices=PRIORITIES, initial="medium")
    kind = forms.ChoiceField(choices=TRIGGER_KINDS)
    duration = forms.FloatField(required=False, min_value=1, label="Duration (s)")
    message_threshold = forms.IntegerField(required=False, min_value=1)
    time_threshold = forms.FloatField(
        required=False, min_value=1, label="Time threshold (s)"
    )
    metric = forms.CharField(required=False, max_length=100)
    threshold = forms.FloatField(required=False)

    def __init__(self, *args: Any, members: list[tuple[int, str]], **kwargs: Any):
        super().__init__(*args, **kwargs)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        for name in CONDITION_FIELDS.get(data.get("kind", ""), ()):
            if data.get(name) in (None, ""):
                self.add_error(name, f"needed for a {data['kind']} trigger")
        return data

    def to_trigger(self) -> dict[str, Any]:
        data = self.cleaned_data
        condition = {"kind": data["kind"]}
        condition.update({n: data[n] for n in CONDITION_FIELDS[data["kind"]]})
        return {
            "name": data["name"],
            "priority": data["priority"],
            "condition": condition,
        }

    @staticmethod
    def initial_from(trigger: dict[str, Any]) -> dict[str, Any]:
        condition = trigger.get("condition", {})
        return {
            "name": trigger.get("name"),
            "priority": trigger.get("priority"),
            **condition,
        }


TriggerFormSet = forms.formset_factory(TriggerForm, extra=0, can_delete=True)


class SleeptimeForm(PatternForm):
    pattern = "sleeptime"
    check_interval = forms.FloatField(
        min_value=1, initial=1200, label="Check every (s)"
    )
    intervention_agent_id = forms.TypedChoiceField(
        coerce=int, required=False, empty_value=None, label="Intervention agent"
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        initial = kwargs.get("initial") or {}
        super().__init__(*args, **kwargs)
        self.fields["intervention_agent_id"].choices = member_choice(
            self.members, blank="First supervisor"
        )
        self.triggers = TriggerFormSet(
            self.data or None,
            initial=[TriggerForm.initial_from(t) for t in initial.get("triggers", [])],
            prefix=f"{self.prefix}-triggers",
            form_kwargs={"members": self.members},
        )

    def formsets(self) -> list[forms.BaseFormSet]:
        return [self.triggers]

    def to_config(self) -> dict[str, Any]:
        triggers = [
            form.to_trigger()
            for form in self.triggers.forms
            if form.cleaned_data and not form.cleaned_data.get("DELETE")
        ]
        return {**self.cleaned_data, "triggers": triggers}


PATTERN_FORMS: dict[str, type[PatternForm]] = {
    form.pattern: form
    for form in (
        SupervisorForm,
        RoundRobinForm,
        VotingForm,
        PipelineForm,
        DynamicForm,
        SleeptimeForm,
    )
}


def pattern_forms(
    group: AgentGroup, members: list[tuple[int, str]], data: Any = None
) -> dict[str, PatternForm]:
    """A form per pattern, the group's own pattern filled from its config
    (bound to ``data`` for the pattern being posted)."""
    posted = data.get("pattern") if data is not None else None
    forms_by_pattern = {}
    for name, form_class in PATTERN_FORMS.items():
        initial = form_class.initial_from(group.config) if name == group.pattern else {}
        forms_by_pattern[name] = form_class(
            data if name == posted else None,
            initial=initial,
            prefix=name,
            members=members,
        )
    return forms_by_pattern


RULE_KINDS = [
    ("exit_loop", "Ends the turn"),
    ("continue_loop", "Turn goes on after it"),
    ("start_constraint", "Must be called first"),
    ("max_calls", "At most N calls (value: N)"),
    ("requires_prior", "Only after another tool (value: that tool)"),
]


class ToolRuleForm(forms.Form):
    """One rule of an agent's tool loop; ``agent_loop_config_update``
    judges it (e.g. that max_calls has a number)."""

    tool = forms.ChoiceField(required=False)
    kind = forms.ChoiceField(choices=RULE_KINDS, label="Rule")
    value = forms.CharField(
        required=False, max_length=100, help_text="For max calls and requires."
    )

    def __init__(self, *args: Any, tools: list[str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["tool"].choices = [("", "— none —")] + [(t, t) for t in tools]

    def to_rule(self) -> dict[str, Any]:
        data = self.cleaned_data
        value: Any = data["value"].strip() or None
        if data["kind"] == "max_calls" and value is not None:
            value = int(value) if value.isdigit() else value
        return {"tool": data["tool"], "kind": data["kind"], "value": value}


ToolRuleFormSet = forms.formset_factory(ToolRuleForm, extra=2, can_delete=True)


def tool_rule_rows(formset: forms.BaseFormSet) -> list[dict[str, Any]]:
    """The kept rows of a valid formset that name a tool, as rules."""
    return [
        form.to_rule()
        for form in formset.forms
        if form.cleaned_data.get("tool") and not form.cleaned_data.get("DELETE")
    ]


class AgentCreateForm(forms.Form):
    template = forms.ChoiceField(
        label="Role template",
        help_text="Its role and persona text start the agent's persona block.",
    )
    name = forms.CharField(max_length=100)
    model_name = forms.CharField(
        required=False,
        max_length=100,
        label="Model",
        help_text="e.g. gpt-4o-mini; needed to be answered by the LLM.",
    )
    answered_by_llm = forms.BooleanField(required=False, label="Answered by the LLM")

    def __init__(self, *args: Any, templates: list[str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["template"].choices = [(t, t) for t in templates]
