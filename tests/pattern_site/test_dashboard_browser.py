"""Every dashboard page fits a phone: no sideways scroll at 390 px, light or
dark, in headless Chromium on a real Daphne."""

from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from activity.stream.services import notable_flag
from coordination.groups.services import (
    group_create,
    group_member_add,
    group_message_route,
)
from coordination.work.services import handoff_create, task_create
from folders.files.services import file_write, folder_create
from folders.models import FolderFile
from memory.blocks.services import block_create
from memory.longterm.services import (
    archival_entry_create,
    conversation_current,
    conversation_start,
    messages_append,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_update
from tests.factories import AgentFactory, ConstellationFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PHONE = {"width": 390, "height": 844}

# Long words and long lines are what push a narrow page sideways.
LONG = (
    "Partner prefers asynchronous updates; see "
    "https://example.org/notes/a-rather-long-address-without-any-break-in-it "
    "and the_identifier_with_no_spaces_that_runs_on_and_on_for_a_while."
)

# Links and buttons of the top bar that a phone cannot reach, by their text.
OFFSCREEN_CONTROLS = """
[...document.querySelectorAll(".topbar a, .topbar button, .topbar input")]
  .filter((control) => control.getBoundingClientRect().right > innerWidth)
  .map((control) => control.textContent.trim() || control.name)
"""

PAGES = [
    "login",
    "home",
    "constellation",
    "agent",
    "agent chat",
    "agent new",
    "agent context",
    "block",
    "approvals",
    "search",
    "archival",
    "conversations",
    "conversation",
    "activity",
    "catch-up",
    "tasks",
    "handoffs",
    "groups",
    "group",
    "group run",
    "folders",
    "folder",
    "folder file",
]


@dataclass
class World:
    user: Any
    paths: dict[str, str]


def dashboard_world() -> World:
    """A constellation with one of everything a dashboard page shows."""
    # Staff: the top bar has its longest set of links (Admin too).
    user = UserFactory(username="partner-with-a-long-name", is_staff=True)
    constellation = ConstellationFactory(partner=user, name="Household")
    agent = AgentFactory(constellation=constellation, name="Entropy")
    other = agent_update(
        agent=AgentFactory(constellation=constellation, name="Flux"),
        model_name="gpt-4o-mini",
        answered_by_llm=True,
    )
    actor = Actor.for_user(user)
    block = block_create(
        actor=Actor.system(),
        label="partner_preferences",
        owner=agent,
        description=LONG,
        content=f"{LONG}\n" * 6,
    )
    archival_entry_create(agent=agent, content=LONG, tags=["preferences"])
    conversation = conversation_start(agent=agent, title="Planning the week")
    messages_append(
        conversation=conversation,
        messages=[
            {"role": "user", "content": LONG},
            {"role": "assistant", "content": "Noted."},
        ],
    )
    # Flux's chat: the partner's message, a tool call with a long result,
    # the answer.
    messages_append(
        conversation=conversation_current(agent=other),
        author=actor.ref,
        messages=[
            {"role": "user", "content": LONG},
            {
                "role": "assistant",
                "content": LONG,
                "tool_calls": [
                    {"id": "c1", "name": "archival_memory_search", "arguments": LONG}
                ],
            },
            {"role": "tool", "content": LONG * 3, "tool_call_id": "c1"},
            {"role": "assistant", "content": "Noted."},
        ],
    )
    notable_flag(
        actor=Actor.for_agent(agent),
        constellation=constellation,
        description=LONG,
        importance="high",
        agents_involved=[other],
    )
    task_create(actor=actor, constellation=constellation, title=LONG[:120])
    handoff_create(actor=Actor.for_agent(agent), to_agent=other, content=LONG)
    group = group_create(
        constellation=constellation,
        name="Planners",
        pattern="round_robin",
        description=LONG,
    )
    group_member_add(group=group, agent=agent)
    run = group_message_route(actor=Actor.system(), group=group, message=LONG)
    folder = folder_create(
        actor=actor, constellation_id=constellation.pk, name="notes", description=LONG
    )
    file_write(actor=actor, folder=folder, path="plans/2026/week.md", text=LONG)
    file = FolderFile.objects.get(folder=folder)
    c, a = constellation.pk, agent.pk
    return World(
        user=user,
        paths={
            "login": "/login/",
            "home": "/",
            "constellation": f"/constellations/{c}/",
            "agent": f"/agents/{a}/",
            "agent chat": f"/agents/{other.pk}/",
            "agent new": f"/groups/constellations/{c}/agents/new/",
            "agent context": f"/memory/agents/{a}/context/",
            "block": f"/memory/blocks/{block.pk}/",
            "approvals": "/memory/approvals/",
            "search": "/memory/search/?q=asynchronous",
            "archival": f"/memory/agents/{a}/archival/",
            "conversations": f"/memory/agents/{a}/conversations/",
            "conversation": f"/memory/conversations/{conversation.pk}/",
            "activity": f"/activity/constellations/{c}/",
            "catch-up": f"/activity/agents/{a}/catch-up/",
            "tasks": f"/constellations/{c}/tasks/",
            "handoffs": f"/constellations/{c}/handoffs/",
            "groups": f"/groups/constellations/{c}/",
            "group": f"/groups/{group.pk}/",
            "group run": f"/groups/runs/{run.pk}/",
            "folders": "/folders/",
            "folder": f"/folders/{folder.pk}/",
            "folder file": f"/folders/{folder.pk}/files/{file.pk}/",
        },
    )


def signed_in_page(browser: Any, base_url: str, user: Any, **context: Any) -> Any:
    """A new page whose requests carry ``user``'s session."""
    client = Client()
    client.force_login(user)
    browser_context = browser.new_context(**context)
    browser_context.add_cookies(
        [
            {
                "name": "sessionid",
                "value": client.cookies["sessionid"].value,
                "url": base_url,
            }
        ]
    )
    return browser_context.new_page()


@pytest.fixture
def world(transactional_db: None) -> World:
    return dashboard_world()


@pytest.mark.parametrize("name", PAGES)
def test_the_page_fits_a_phone_without_sideways_scroll(
    name, world, daphne_server, browser
):
    errors: list[str] = []
    for scheme in ("light", "dark"):
        context = {"viewport": PHONE, "color_scheme": scheme}
        if name == "login":
            page = browser.new_context(**context).new_page()
        else:
            page = signed_in_page(browser, daphne_server, world.user, **context)
        page.on(
            "pageerror",
            lambda error, scheme=scheme: errors.append(f"{scheme}: {error}"),
        )
        response = page.goto(f"{daphne_server}{world.paths[name]}")
        assert response is not None and response.status == 200, name
        page.wait_for_load_state("load")
        scroll, inner = page.evaluate(
            "[document.documentElement.scrollWidth, window.innerWidth]"
        )
        assert scroll <= inner, f"{name} ({scheme}) is {scroll}px wide at {inner}px"
        offscreen = page.evaluate(OFFSCREEN_CONTROLS)
        assert offscreen == [], f"{name} ({scheme}): off screen: {offscreen}"
        page.context.close()
    assert errors == []
