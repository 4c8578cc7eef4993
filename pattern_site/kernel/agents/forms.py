"""Dashboard forms of agents: they parse; ``agent_update`` judges."""

from django import forms


class AgentModelForm(forms.Form):
    model_name = forms.CharField(
        required=False,
        max_length=100,
        label="Model",
        help_text="The model the agent runs on, e.g. gpt-4o-mini.",
    )
    answered_by_llm = forms.BooleanField(
        required=False,
        label="Answered by the LLM",
        help_text="The site answers this agent's group deliveries with this"
        " model through its LLM provider, with the agent's built context as"
        " system prompt. Off: the agent's own program takes them from its"
        " inbox.",
    )
