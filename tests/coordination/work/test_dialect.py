"""The /coord grammar: each command, quoting and the errors that teach it."""

import pytest

from coordination.work.dialect import CoordCommand, coord_execute, coord_parse
from coordination.work.models import HandoffNote, Task, TaskStatus
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import Conflict, InvalidInput, NotFound
from tests.factories import AgentFactory


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("status", CoordCommand("status")),
        ("/coord status", CoordCommand("status")),
        ("tasks", CoordCommand("tasks", {"filter": "open"})),
        ("tasks mine", CoordCommand("tasks", {"filter": "mine"})),
        ("TASKS All", CoordCommand("tasks", {"filter": "all"})),
        (
            'assign "fix bug" to @entropy',
            CoordCommand("assign", {"title": "fix bug", "agent": "entropy"}),
        ),
        (
            "assign 'say \"hi\"' to @Flux",
            CoordCommand("assign", {"title": 'say "hi"', "agent": "Flux"}),
        ),
        (
            "assign task-7 to @anchor",
            CoordCommand("assign", {"task_id": 7, "agent": "anchor"}),
        ),
        ("complete task-123", CoordCommand("complete", {"task_id": 123})),
        ("claim TASK-4", CoordCommand("claim", {"task_id": 4})),
        (
            'block task-4 "waiting on partner"',
            CoordCommand("block", {"task_id": 4, "reason": "waiting on partner"}),
        ),
        (
            'handoff @anchor "context \\"quoted\\" here"',
            CoordCommand(
                "handoff", {"agent": "anchor", "content": 'context "quoted" here'}
            ),
        ),
        (
            'handoff @anyone "free for all"',
            CoordCommand("handoff", {"agent": "anyone", "content": "free for all"}),
        ),
        (
            'note "important observation"',
            CoordCommand("note", {"text": "important observation", "decision": False}),
        ),
        (
            'note "we ship on Friday" decision',
            CoordCommand("note", {"text": "we ship on Friday", "decision": True}),
        ),
        ("read handoff-3", CoordCommand("read", {"handoff_id": 3})),
    ],
)
def test_coord_parse_reads_each_command(text, expected):
    assert coord_parse(text) == expected


@pytest.mark.parametrize(
    ("text", "command", "problem"),
    [
        ("assign fix bug to @entropy", "assign", "double quotes"),
        ('assign "fix bug" for @entropy', "assign", "expected 'to'"),
        ('assign "fix bug" to entropy', "assign", "not an agent mention"),
        ("complete 123", "complete", "not a task id like task-12"),
        ("complete task-abc", "complete", "not a task id"),
        ("claim", "claim", "expected 1 argument, got 0"),
        ("block task-3", "block", "expected 2 arguments"),
        ('block task-3 ""', "block", "the reason is empty"),
        ("handoff @anchor", "handoff", "expected 2 arguments"),
        ("note", "note", "expected 1 argument"),
        ('note "x" maybe', "note", 'or end with "decision"'),
        ("tasks everything", "tasks", "one of mine, open, all"),
        ("status now", "status", "expected 0 arguments"),
        ("read task-1", "read", "not a handoff id"),
    ],
)
def test_coord_parse_errors_name_the_command_and_show_its_grammar(
    text, command, problem
):
    with pytest.raises(InvalidInput) as err:
        coord_parse(text)
    assert err.value.message.startswith(f"{command}: ")
    assert problem in err.value.message
    assert "Usage: /coord " + err.value.extra["grammar"] in err.value.message
    assert err.value.extra["command"] == command


def test_coord_parse_unknown_command_lists_every_command():
    with pytest.raises(InvalidInput) as err:
        coord_parse("finish task-1")
    assert "unknown command 'finish'" in err.value.message
    for line in ("/coord status", "/coord claim task-<id>", "/coord note"):
        assert line in err.value.message


@pytest.mark.parametrize("text", ['note "unclosed', "", "/coord"])
def test_coord_parse_unreadable_or_empty_text_shows_the_grammar(text):
    with pytest.raises(InvalidInput, match="/coord assign"):
        coord_parse(text)


def run(actor, constellation, text):
    return coord_execute(
        actor=actor, constellation=constellation, command=coord_parse(text)
    )


@pytest.mark.django_db
def test_coord_commands_drive_tasks_handoffs_and_notes(constellation, agent):
    anchor = AgentFactory(constellation=constellation, name="Anchor")
    me = Actor.for_agent(agent)
    result = run(me, constellation, 'assign "fix bug" to @anchor')
    task = Task.objects.get()
    assert result.text == f"created and assigned {task.ref} to @Anchor: fix bug"
    assert task.assignee == anchor
    job = run(me, constellation, 'assign "write tests" to @entropy').data["id"]
    assert run(me, constellation, f"claim task-{job}").data["status"] == "in_progress"
    run(me, constellation, f'block task-{job} "needs the fix"')
    assert Task.objects.get(pk=job).blocked_reason == "needs the fix"
    with pytest.raises(Conflict):
        run(me, constellation, f"complete task-{job}")
    mine = run(me, constellation, "tasks mine")
    assert f"task-{job} [blocked] write tests" in mine.text
    run(me, constellation, 'handoff @anchor "the fix is in utils.py"')
    note = HandoffNote.objects.get()
    assert (note.from_agent, note.to_agent) == (agent, anchor)
    run(me, constellation, 'note "partner prefers mornings"')
    status = run(Actor.for_agent(anchor), constellation, "status")
    assert "fix bug" in status.text
    assert "the fix is in utils.py" in status.text
    assert "[Entropy] partner prefers mornings" in status.text
    assert status.data["unread_handoffs"] == [note.pk]
    run(Actor.for_agent(anchor), constellation, f"read {note.ref}")
    run(Actor.for_agent(anchor), constellation, f"complete {task.ref}")
    assert Task.objects.get(pk=task.pk).status == TaskStatus.DONE


@pytest.mark.django_db
def test_coord_names_unknown_agents_and_tasks(constellation, agent):
    me = Actor.for_agent(agent)
    with pytest.raises(NotFound, match="no agent named @nobody here; agents: @Entropy"):
        run(me, constellation, 'assign "x" to @nobody')
    with pytest.raises(NotFound, match="task-999 does not exist"):
        run(me, constellation, "complete task-999")
    assert Task.objects.count() == 0
