"""Dashboard forms of activity: feed filters and flagging a notable event."""

from typing import Any

from django import forms

from activity.stream.models import EventType, Importance
from pattern_site.kernel.agents.models import Agent


class ActivityFilterForm(forms.Form):
    agent = forms.ModelChoiceField(
        queryset=Agent.objects.none(), required=False, empty_label="All agents"
    )
    kind = forms.ChoiceField(
        choices=[("", "All kinds"), *EventType.choices], required=False
    )
    importance = forms.ChoiceField(
        choices=[("", "Any importance"), *Importance.choices],
        required=False,
        label="At least",
    )

    def __init__(self, *args: Any, agents: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"].queryset = agents


class NotableForm(forms.Form):
    description = forms.CharField(max_length=400, widget=forms.TextInput)
    importance = forms.ChoiceField(
        choices=Importance.choices, initial=Importance.MEDIUM
    )
    agents_involved = forms.ModelMultipleChoiceField(
        queryset=Agent.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )

    def __init__(self, *args: Any, agents: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agents_involved"].queryset = agents


CATCH_UP_AWAY = [
    ("", "since its last activity"),
    ("1", "as if away 1 hour"),
    ("24", "as if away 1 day"),
    ("168", "as if away 7 days"),
]


class CatchUpPreviewForm(forms.Form):
    away = forms.ChoiceField(choices=CATCH_UP_AWAY, required=False, label="Preview")
