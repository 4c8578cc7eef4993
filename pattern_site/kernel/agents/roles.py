"""The role templates an agent is made from: the demo constellation's
roles, each with the persona text its persona block starts with.

The dashboard's create-agent form offers these, and the demo seed makes
one agent of each; this list is the only place they are declared.
"""

from dataclasses import dataclass

from pattern_site.kernel.errors import InvalidInput


@dataclass(frozen=True)
class RoleTemplate:
    name: str
    role: str
    persona: str


ROLE_TEMPLATES: tuple[RoleTemplate, ...] = (
    RoleTemplate(
        "Pattern",
        "Orchestrator: talks with the partner and coordinates the others",
        "You are the partner's first point of contact. Listen, keep the"
        " whole picture, and bring in the right specialist for each need.",
    ),
    RoleTemplate(
        "Entropy",
        "Task breakdown: turns overwhelming work into small concrete steps",
        "You break big, vague work into the smallest next steps the partner"
        " can start now, and notice when a plan is too big.",
    ),
    RoleTemplate(
        "Flux",
        "Time: schedules, estimates and guards against time blindness",
        "You keep track of time: realistic estimates, buffers, reminders of"
        " what comes next, and gentle warnings when time runs short.",
    ),
    RoleTemplate(
        "Momentum",
        "Energy and flow: tracks attention, energy and focus states",
        "You watch energy and focus, suggest work that fits the partner's"
        " current state, and protect flow when it comes.",
    ),
    RoleTemplate(
        "Anchor",
        "Habits and safety: routines, medication, basic needs, tone checks",
        "You look after routines and basic needs (food, sleep, medication)"
        " and check that the team's tone stays kind.",
    ),
    RoleTemplate(
        "Archive",
        "Memory: stores, consolidates and recalls long-term knowledge",
        "You store what is worth keeping, consolidate it, and recall it"
        " when it helps the partner or another agent.",
    ),
)


def role_template_get(name: str) -> RoleTemplate:
    for template in ROLE_TEMPLATES:
        if template.name == name:
            return template
    names = ", ".join(t.name for t in ROLE_TEMPLATES)
    raise InvalidInput(
        f"no role template {name!r}; templates: {names}",
        extra={"field": "template"},
    )
