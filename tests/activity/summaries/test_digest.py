from datetime import datetime, timedelta
from typing import Any

from activity.stream.models import EventType, Importance
from activity.summaries.digest import catch_up_budget, catch_up_build
from activity.summaries.models import AgentSummary, ConstellationSummary
from memory.blocks.models import BlockUpdate
from memory.blocks.schemas import ChangesIn
from memory.blocks.services import block_append, block_create, block_share
from memory.blocks.tools import block_changes_tool
from pattern_site.kernel.actors import Actor
from tests.factories import AgentFactory


def _summary(agent: Any, text: str, now: datetime, model: str = "gpt-test") -> None:
    AgentSummary.objects.create(
        agent=agent,
        recent_summary=text,
        messages_covered=12,
        generated_at=now,
        last_active=agent.last_active_at,
        model=model,
    )


def _set_last_active(agent: Any, at: datetime) -> None:
    type(agent).objects.filter(pk=agent.pk).update(last_active_at=at)
    agent.refresh_from_db()


def test_no_catch_up_after_less_than_an_hour(agent: Any, now: datetime) -> None:
    _set_last_active(agent, now - timedelta(minutes=59))
    assert catch_up_build(agent=agent, now=now) is None


def test_catch_up_after_one_hour_counts_what_happened(
    agent: Any, flux: Any, partner: Any, record: Any, now: datetime
) -> None:
    _set_last_active(agent, now - timedelta(hours=1))
    for _ in range(3):
        record(
            actor=Actor.for_agent(flux),
            event_type=EventType.MESSAGE_SENT,
            details={"target": "Bluesky"},
            ago=timedelta(minutes=20),
        )
    record(
        actor=Actor.for_user(partner),
        agent=flux,
        event_type=EventType.MEMORY_BLOCK_UPDATED,
        details={"label": "persona", "change_type": "replace"},
        ago=timedelta(minutes=10),
    )
    record(  # before the absence: not counted
        actor=Actor.for_agent(flux),
        event_type=EventType.MESSAGE_SENT,
        ago=timedelta(hours=3),
    )
    catch_up = catch_up_build(agent=agent, now=now)
    assert catch_up is not None
    assert catch_up.budget_tokens == catch_up_budget(timedelta(hours=1)) == 300
    assert catch_up.text.startswith(
        "## Constellation Update (you were last active 1 hour ago)\n\n"
        "### What's Happened\n"
        "- 4 events across the constellation\n"
        "- 3 messages processed across the constellation\n"
        "- Flux: 3 messages sent\n"
        "- partner (human): 1 memory update\n"
    )


def test_catch_up_after_one_day_lists_decisions_of_medium_and_above(
    agent: Any, flux: Any, partner: Any, record: Any, now: datetime
) -> None:
    _set_last_active(agent, now - timedelta(days=1))
    for description, importance, hours in [
        ("Pause project-X until next month", Importance.HIGH, 5),
        ("No political content on Bluesky", Importance.MEDIUM, 3),
        ("Tidied the archive labels", Importance.LOW, 2),
        ("Old decision from last week", Importance.CRITICAL, 60),
    ]:
        record(
            actor=Actor.for_user(partner),
            constellation_id=agent.constellation_id,
            event_type=EventType.NOTABLE,
            importance=importance,
            details={"description": description},
            ago=timedelta(hours=hours),
        )
    catch_up = catch_up_build(agent=agent, now=now)
    assert catch_up is not None
    assert "(you were last active yesterday)" in catch_up.text
    assert (
        "### Key Decisions\n"
        "- No political content on Bluesky\n"
        "- Pause project-X until next month\n\n"
    ) in catch_up.text
    assert "Tidied" not in catch_up.text
    assert "Old decision" not in catch_up.text


def test_catch_up_after_seven_days_has_every_section_of_the_example(
    agent: Any, flux: Any, constellation: Any, record: Any, now: datetime
) -> None:
    anchor = AgentFactory(constellation=constellation, name="Anchor")
    _set_last_active(agent, now - timedelta(days=7))
    _set_last_active(flux, now - timedelta(hours=2))
    _set_last_active(anchor, now - timedelta(days=3))
    _summary(flux, "Primarily handling Bluesky engagement.", now)
    _summary(
        anchor,
        "Anchor: Reviewed 8 of Flux's posts.",
        now,
        model="extractive:lexical",
    )
    _summary(agent, "Entropy's own summary is not shown to it.", now)
    ConstellationSummary.objects.create(
        constellation=constellation,
        period_start=now - timedelta(days=2),
        period_end=now - timedelta(days=1),
        summary="A busy day.",
        key_decisions=[],
        open_threads=["Partner wants to revisit medication adjustments"],
        model="gpt-test",
    )
    record(
        actor=Actor.for_agent(flux),
        event_type=EventType.NOTABLE,
        importance=Importance.MEDIUM,
        details={"description": "Memory system redesign approved"},
        ago=timedelta(days=2),
    )
    catch_up = catch_up_build(agent=agent, now=now)
    assert catch_up is not None
    text = catch_up.text
    assert text.startswith("## Constellation Update (you were last active 7 days ago)")
    assert "### Key Decisions\n- Memory system redesign approved\n" in text
    assert (
        "### Open Threads\n- Partner wants to revisit medication adjustments\n"
    ) in text
    assert (
        "### Agent Activity\n"
        "**Flux** (last active: 2 hours ago)\n"
        "Primarily handling Bluesky engagement.\n\n"
        "**Anchor** (last active: 3 days ago) (extractive: sentences picked "
        "from its messages, not written)\n"
        "Anchor: Reviewed 8 of Flux's posts.\n"
    ) in text
    assert "own summary" not in text
    assert catch_up.budget_tokens == 1500
    assert catch_up.tokens <= catch_up.budget_tokens


def test_catch_up_leaves_out_lines_past_its_budget(
    agent: Any, partner: Any, record: Any, now: datetime
) -> None:
    _set_last_active(agent, now - timedelta(hours=1))
    for n in range(40):
        record(
            actor=Actor.for_user(partner),
            constellation_id=agent.constellation_id,
            event_type=EventType.NOTABLE,
            importance=Importance.HIGH,
            details={"description": f"Decision number {n} " + "detail " * 10},
            ago=timedelta(minutes=30),
        )
    catch_up = catch_up_build(agent=agent, now=now)
    assert catch_up is not None
    assert catch_up.omitted_lines > 0
    assert f"{catch_up.omitted_lines} more lines left out" in catch_up.text
    assert catch_up.tokens <= catch_up.budget_tokens + 20


def test_budget_grows_with_time_away() -> None:
    budgets = [catch_up_budget(timedelta(hours=h)) for h in (1, 6, 24, 72, 168, 1000)]
    assert budgets == sorted(budgets)
    assert budgets[0] == 300 and budgets[-2] == budgets[-1] == 1500


def test_a_decision_flagged_twice_is_listed_once(
    agent: Any, flux: Any, record: Any, now: datetime
) -> None:
    _set_last_active(agent, now - timedelta(hours=5))
    for hours in (1, 2):
        record(
            actor=Actor.for_agent(flux),
            event_type=EventType.NOTABLE,
            importance=Importance.MEDIUM,
            details={"description": "Tone review for Flux's post"},
            ago=timedelta(hours=hours),
        )
    catch_up = catch_up_build(agent=agent, now=now)
    assert catch_up is not None
    assert catch_up.text.count("- Tone review for Flux's post") == 1


def test_catch_up_lists_blocks_others_changed_while_away_and_not_yet_seen(
    agent: Any, flux: Any, partner: Any, now: datetime
) -> None:
    _set_last_active(agent, now - timedelta(hours=2))
    system = Actor.system()
    plan = block_create(actor=system, owner=agent, label="plan", content="start")
    read = block_create(actor=system, owner=agent, label="read", content="start")
    for block in (plan, read):
        block_share(actor=system, block=block, agent=flux, access="read_write")
    block_append(actor=Actor.for_agent(flux), block=plan, content="before")
    # What was written before the absence is not news of it.
    BlockUpdate.objects.filter(block__in=[plan, read]).update(
        created_at=now - timedelta(hours=3)
    )
    block_append(actor=Actor.for_agent(flux), block=plan, content="during")
    block_append(actor=Actor.for_agent(flux), block=plan, content="again")
    block_append(actor=Actor.for_user(partner), block=plan, content="mine")
    block_append(actor=Actor.for_agent(agent), block=plan, content="own")
    block_append(actor=Actor.for_agent(flux), block=read, content="seen")
    # The agent took the changes of "read" already.
    block_changes_tool(actor=Actor.for_agent(agent), args=ChangesIn(labels=["read"]))

    catch_up = catch_up_build(agent=agent, now=now)

    assert catch_up is not None
    section = catch_up.text.split("### Memory Changes\n")[1].split("\n\n")[0]
    lines = section.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("- plan: partner (human), 1 change, latest ")
    assert lines[0].endswith(" UTC: append: mine")
    assert lines[1].startswith("- plan: Flux (agent), 2 changes, latest ")
    assert lines[1].endswith(" UTC: append: again")


def test_catch_up_says_last_active_as_the_home_page_does(
    agent: Any, flux: Any, now: datetime
) -> None:
    """A summary remembers when its events were; that is not when the agent
    was last active, which every page reads from the agent itself."""
    _set_last_active(agent, now - timedelta(days=1))
    AgentSummary.objects.create(
        agent=flux,
        recent_summary="Flux was set up.",
        messages_covered=1,
        generated_at=now,
        last_active=now - timedelta(minutes=5),
        model="gpt-test",
    )
    catch_up = catch_up_build(agent=agent, now=now)
    assert catch_up is not None
    assert "**Flux** (last active: never)" in catch_up.text
