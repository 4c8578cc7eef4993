"""Task transitions, dependencies, rights, handoffs and compare-and-set
state through the service layer."""

import pytest

from coordination.work.models import Task, TaskStatus
from coordination.work.selectors import (
    coordination_state_get_for_actor,
    handoff_inbox_for_agent,
    handoffs_render_for_agent,
    task_get_for_actor,
)
from coordination.work.services import (
    coordination_note_add,
    coordination_state_set,
    handoff_create,
    handoff_mark_read,
    task_assign,
    task_claim,
    task_complete,
    task_create,
    task_dependency_add,
    task_status_set,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    PermissionDenied,
)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("path", "end"),
    [
        (["in_progress", "done"], "done"),
        (["blocked", "open", "in_progress", "blocked", "in_progress"], "in_progress"),
        (["done", "open"], "open"),
        (["cancelled", "open", "cancelled"], "cancelled"),
    ],
)
def test_task_status_follows_allowed_transitions(make_task, partner, path, end):
    task = make_task()
    actor = Actor.for_user(partner)
    for status in path:
        task = task_status_set(actor=actor, task=task, status=status, reason="wait")
    task.refresh_from_db()
    assert task.status == end
    assert task.updated_by == actor.ref


@pytest.mark.parametrize(
    ("before", "to"),
    [
        (["blocked"], "done"),
        (["done"], "in_progress"),
        (["done"], "done"),
        (["cancelled"], "blocked"),
        (["cancelled"], "done"),
    ],
)
def test_task_status_refuses_moves_the_current_status_does_not_allow(
    make_task, partner, before, to
):
    task = make_task()
    actor = Actor.for_user(partner)
    for status in before:
        task_status_set(actor=actor, task=task, status=status, reason="wait")
    with pytest.raises(Conflict) as err:
        task_status_set(actor=actor, task=task, status=to, reason="wait")
    assert "it can go to" in err.value.message
    task.refresh_from_db()
    assert task.status == before[-1]


def test_task_status_rejects_an_unknown_status(make_task, partner):
    task = make_task()
    with pytest.raises(InvalidInput, match="statuses are open, in_progress"):
        task_status_set(actor=Actor.for_user(partner), task=task, status="finished")


def test_blocking_needs_a_reason(make_task, partner):
    task = make_task()
    with pytest.raises(InvalidInput, match="reason is required"):
        task_status_set(actor=Actor.for_user(partner), task=task, status="blocked")
    task.refresh_from_db()
    assert task.status == TaskStatus.OPEN


def test_task_cannot_start_or_complete_before_its_dependencies_are_done(
    make_task, partner, agent
):
    design = make_task("design")
    build = make_task("build", dependencies=[design])
    actor = Actor.for_agent(agent)
    with pytest.raises(Conflict, match=rf"depends on {design.ref} \(open\)"):
        task_claim(actor=actor, task=build)
    with pytest.raises(Conflict, match="must be done first"):
        task_complete(actor=actor, task=build)
    human = Actor.for_user(partner)
    task_status_set(actor=human, task=design, status="cancelled")
    with pytest.raises(Conflict, match="cancelled"):
        task_complete(actor=actor, task=build)
    task_status_set(actor=human, task=design, status="open")
    task_complete(actor=actor, task=design)
    assert task_claim(actor=actor, task=build).status == TaskStatus.IN_PROGRESS


def test_parent_completes_only_when_subtasks_are_finished(make_task, partner):
    actor = Actor.for_user(partner)
    parent = make_task("refactor memory")
    first = make_task("step 1", parent=parent)
    second = make_task("step 2", parent=parent)
    with pytest.raises(Conflict, match="subtasks"):
        task_complete(actor=actor, task=parent)
    task_complete(actor=actor, task=first)
    task_status_set(actor=actor, task=second, status="cancelled")
    assert task_complete(actor=actor, task=parent).status == TaskStatus.DONE


def test_dependencies_refuse_a_cycle(make_task, partner):
    actor = Actor.for_user(partner)
    a = make_task("a")
    b = make_task("b", dependencies=[a])
    c = make_task("c", dependencies=[b])
    with pytest.raises(InvalidInput, match="cycle"):
        task_dependency_add(actor=actor, task=a, depends_on=c)
    with pytest.raises(InvalidInput, match="cycle"):
        task_dependency_add(actor=actor, task=a, depends_on=a)
    assert list(a.dependencies.all()) == []


def test_claim_takes_an_open_task_and_a_second_claim_conflicts(make_task, agent, flux):
    task = make_task()
    claimed = task_claim(actor=Actor.for_agent(agent), task=task)
    assert (claimed.status, claimed.assignee) == (TaskStatus.IN_PROGRESS, agent)
    with pytest.raises(Conflict, match="already claimed by @Entropy"):
        task_claim(actor=Actor.for_agent(flux), task=task)


def test_an_agent_cannot_change_another_agents_task(make_task, agent, flux):
    task = make_task(assignee=flux)
    with pytest.raises(PermissionDenied, match="assigned to Flux"):
        task_complete(actor=Actor.for_agent(agent), task=task)
    with pytest.raises(PermissionDenied, match="reassign"):
        task_assign(actor=Actor.for_agent(agent), task=task, assignee=agent)
    task.refresh_from_db()
    assert (task.status, task.assignee) == (TaskStatus.OPEN, flux)


def test_completing_unassigned_work_credits_the_agent(make_task, agent):
    task = task_complete(actor=Actor.for_agent(agent), task=make_task())
    assert (task.status, task.assignee) == (TaskStatus.DONE, agent)


def test_only_assignee_creator_or_human_cancel(make_task, agent, flux):
    task = make_task(actor=Actor.for_agent(flux))
    with pytest.raises(PermissionDenied, match="cancel or reopen"):
        task_status_set(actor=Actor.for_agent(agent), task=task, status="cancelled")
    task = task_status_set(actor=Actor.for_agent(flux), task=task, status="cancelled")
    assert task.status == TaskStatus.CANCELLED


def test_tasks_do_not_reach_across_constellations(make_task, partner, elsewhere):
    task = make_task()
    with pytest.raises(NotFound):
        task_get_for_actor(actor=Actor.for_agent(elsewhere), task_id=task.pk)
    with pytest.raises(NotFound):
        task_assign(actor=Actor.for_user(partner), task=task, assignee=elsewhere)
    with pytest.raises(NotFound):
        make_task(assignee=elsewhere)


def test_task_create_records_its_creator(constellation, agent):
    task = task_create(
        actor=Actor.for_agent(agent), constellation=constellation, title="  plan  "
    )
    assert (task.title, task.created_by_agent, task.created_by_user) == (
        "plan",
        agent,
        None,
    )
    assert Task.objects.count() == 1


def test_handoff_shows_in_the_recipients_context_until_read(agent, flux):
    note = handoff_create(
        actor=Actor.for_agent(flux), to_agent=agent, content="the API is half done"
    )
    broadcast = handoff_create(
        actor=Actor.for_agent(flux), to_agent=None, content="partner is tired today"
    )
    rendered = handoffs_render_for_agent(agent)
    assert "the API is half done" in rendered
    assert "partner is tired today" in rendered
    assert "from @Flux to you" in rendered
    assert handoffs_render_for_agent(flux) == ""
    handoff_mark_read(actor=Actor.for_agent(agent), note=note)
    rendered = handoffs_render_for_agent(agent)
    assert "the API is half done" not in rendered
    assert "partner is tired today" in rendered
    handoff_mark_read(actor=Actor.for_agent(agent), note=broadcast)
    assert handoffs_render_for_agent(agent) == ""
    assert list(handoff_inbox_for_agent(agent=agent)) == []


def test_handoff_read_marking_is_for_the_recipient_and_happens_once(agent, flux):
    note = handoff_create(actor=Actor.for_agent(agent), to_agent=flux, content="x")
    with pytest.raises(PermissionDenied, match="its recipient"):
        handoff_mark_read(actor=Actor.for_agent(agent), note=note)
    first = handoff_mark_read(actor=Actor.for_agent(flux), note=note).read_at
    assert first is not None
    assert handoff_mark_read(actor=Actor.for_agent(flux), note=note).read_at == first


def test_handoffs_are_written_by_agents_to_others(partner, agent, elsewhere):
    with pytest.raises(PermissionDenied, match="written by agents"):
        handoff_create(actor=Actor.for_user(partner), to_agent=agent, content="x")
    with pytest.raises(InvalidInput, match="not to yourself"):
        handoff_create(actor=Actor.for_agent(agent), to_agent=agent, content="x")
    with pytest.raises(NotFound):
        handoff_create(actor=Actor.for_agent(agent), to_agent=elsewhere, content="x")


def test_state_compare_and_set_refuses_a_stale_version(constellation, agent, flux):
    a, b = Actor.for_agent(agent), Actor.for_agent(flux)
    state = coordination_state_set(
        actor=a,
        constellation=constellation,
        key="focus",
        value="inbox",
        expected_version=0,
    )
    assert state.version == 1
    coordination_state_set(
        actor=a,
        constellation=constellation,
        key="focus",
        value="taxes",
        expected_version=1,
    )
    with pytest.raises(Conflict) as err:
        coordination_state_set(
            actor=b,
            constellation=constellation,
            key="focus",
            value="email",
            expected_version=1,
        )
    assert "is at version 2, written by Entropy" in err.value.message
    assert err.value.extra == {"key": "focus", "version": 2, "value": "taxes"}
    with pytest.raises(Conflict, match="version 0"):
        coordination_state_set(
            actor=b, constellation=constellation, key="new", value=1, expected_version=3
        )
    current = coordination_state_get_for_actor(
        actor=b, constellation=constellation, key="focus"
    )
    assert (current.value, current.version, current.updated_by) == ("taxes", 2, a.ref)


def test_notes_append_to_shared_state(constellation, agent, flux):
    coordination_note_add(
        actor=Actor.for_agent(agent), constellation=constellation, text="one"
    )
    state = coordination_note_add(
        actor=Actor.for_agent(flux), constellation=constellation, text="two"
    )
    assert [(n["by"], n["text"]) for n in state.value] == [
        ("Entropy", "one"),
        ("Flux", "two"),
    ]
    assert state.version == 2


def test_the_built_context_carries_unread_handoffs_until_read(agent, flux):
    from memory.context import context_build

    note = handoff_create(
        actor=Actor.for_agent(flux), to_agent=agent, content="deploy waits on you"
    )
    built = context_build(agent=agent)
    assert "deploy waits on you" in built.system_prompt
    assert built.metadata["tokens_by_section"]["handoffs"] > 0
    handoff_mark_read(actor=Actor.for_agent(agent), note=note)
    assert "deploy waits on you" not in context_build(agent=agent).system_prompt
