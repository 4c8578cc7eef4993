"""The ``/coord`` dialect: one line of command text in, a text answer out.

``coord_parse`` turns the text into a ``CoordCommand`` or raises
``InvalidInput`` naming the command and showing its grammar;
``coord_execute`` runs it through the work selectors and services, so the
dialect has exactly the rights and rules of the typed endpoints.

Quoting follows the shell: "double" or 'single' quotes around text with
spaces, backslash escapes inside double quotes.
"""

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from coordination.work import selectors, services
from coordination.work.models import HandoffNote, Task, TaskStatus
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Constellation
from pattern_site.kernel.errors import InvalidInput

GRAMMAR: dict[str, str] = {
    "status": "status",
    "tasks": "tasks [mine|open|all]",
    "assign": 'assign "<title>" to @<agent>  |  assign task-<id> to @<agent>',
    "claim": "claim task-<id>",
    "complete": "complete task-<id>",
    "block": 'block task-<id> "<reason>"',
    "handoff": 'handoff @<agent>|@anyone "<context>"',
    "note": 'note "<observation>" [decision]',
    "read": "read handoff-<id>",
}
GRAMMAR_TEXT = "\n".join(f"/coord {line}" for line in GRAMMAR.values())

_TASK_REF = re.compile(r"^task-(\d+)$", re.IGNORECASE)
_HANDOFF_REF = re.compile(r"^handoff-(\d+)$", re.IGNORECASE)
_MENTION = re.compile(r"^@([\w.-]+)$")
ANYONE = "anyone"


@dataclass(frozen=True)
class CoordCommand:
    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class CoordResult:
    command: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)


def _error(name: str, problem: str) -> InvalidInput:
    return InvalidInput(
        f"{name}: {problem}. Usage: /coord {GRAMMAR[name]}",
        extra={"command": name, "grammar": GRAMMAR[name]},
    )


def _task_id(name: str, token: str) -> int:
    match = _TASK_REF.match(token)
    if match is None:
        raise _error(name, f"{token!r} is not a task id like task-12")
    return int(match.group(1))


def _mention(name: str, token: str) -> str:
    match = _MENTION.match(token)
    if match is None:
        raise _error(name, f"{token!r} is not an agent mention like @entropy")
    return match.group(1)


def _text(name: str, token: str, what: str) -> str:
    if not token.strip():
        raise _error(name, f"the {what} is empty")
    return token


def _arity(name: str, args: list[str], count: int, hint: str) -> None:
    if len(args) != count:
        raise _error(
            name,
            f"expected {count} argument{'s' if count != 1 else ''}, got "
            f"{len(args)}{hint}",
        )


QUOTE_HINT = " (put text with spaces in double quotes)"
DECISION = "decision"


def coord_parse(text: str) -> CoordCommand:
    """Parse one command line (with or without the leading ``/coord``)."""
    try:
        tokens = shlex.split(text.strip())
    except ValueError as exc:
        raise InvalidInput(
            f"cannot read the command: {exc} (close every quote). Commands:\n"
            f"{GRAMMAR_TEXT}",
            extra={"grammar": GRAMMAR_TEXT},
        ) from exc
    if tokens and tokens[0].lower() == "/coord":
        tokens = tokens[1:]
    if not tokens:
        raise InvalidInput(
            f"empty command. Commands:\n{GRAMMAR_TEXT}", extra={"grammar": GRAMMAR_TEXT}
        )
    name, args = tokens[0].lower(), tokens[1:]
    if name not in GRAMMAR:
        raise InvalidInput(
            f"unknown command {name!r}. Commands:\n{GRAMMAR_TEXT}",
            extra={"command": name, "grammar": GRAMMAR_TEXT},
        )
    if name == "status":
        _arity(name, args, 0, "")
        return CoordCommand(name)
    if name == "tasks":
        if len(args) > 1 or (args and args[0].lower() not in ("mine", "open", "all")):
            raise _error(name, "the filter is one of mine, open, all")
        return CoordCommand(name, {"filter": args[0].lower() if args else "open"})
    if name == "assign":
        _arity(name, args, 3, QUOTE_HINT)
        if args[1].lower() != "to":
            raise _error(name, f"expected 'to' after the task, got {args[1]!r}")
        agent = _mention(name, args[2])
        if _TASK_REF.match(args[0]):
            return CoordCommand(
                name, {"task_id": _task_id(name, args[0]), "agent": agent}
            )
        return CoordCommand(
            name, {"title": _text(name, args[0], "title"), "agent": agent}
        )
    if name in ("claim", "complete"):
        _arity(name, args, 1, "")
        return CoordCommand(name, {"task_id": _task_id(name, args[0])})
    if name == "block":
        _arity(name, args, 2, QUOTE_HINT)
        return CoordCommand(
            name,
            {
                "task_id": _task_id(name, args[0]),
                "reason": _text(name, args[1], "reason"),
            },
        )
    if name == "handoff":
        _arity(name, args, 2, QUOTE_HINT)
        return CoordCommand(
            name,
            {
                "agent": _mention(name, args[0]),
                "content": _text(name, args[1], "context"),
            },
        )
    if name == "note":
        # A note is an observation; only one flagged ``decision`` is meant to
        # reach every agent's catch-up as a Key Decision.
        decision = len(args) == 2 and args[1].lower() == DECISION
        if not decision:
            _arity(name, args, 1, QUOTE_HINT + f', or end with "{DECISION}"')
        return CoordCommand(
            name,
            {"text": _text(name, args[0], "observation"), "decision": decision},
        )
    _arity(name, args, 1, "")
    match = _HANDOFF_REF.match(args[0])
    if match is None:
        raise _error(name, f"{args[0]!r} is not a handoff id like handoff-3")
    return CoordCommand(name, {"handoff_id": int(match.group(1))})


# --- rendering ---------------------------------------------------------------


def task_line(task: Task) -> str:
    who = f"@{task.assignee.name}" if task.assignee else "unassigned"
    line = f"{task.ref} [{task.status}] {task.title} ({who}"
    if task.priority != 1:
        line += f", {task.get_priority_display().lower()} priority"
    line += ")"
    if task.status == TaskStatus.BLOCKED and task.blocked_reason:
        line += f" blocked: {task.blocked_reason}"
    return line


def task_data(task: Task) -> dict[str, Any]:
    return {
        "id": task.pk,
        "ref": task.ref,
        "title": task.title,
        "status": task.status,
        "assignee": task.assignee.name if task.assignee else None,
    }


def handoff_line(note: HandoffNote) -> str:
    to = f"@{note.to_agent.name}" if note.to_agent else "anyone"
    return f"{note.ref} from @{note.from_agent.name} to {to}: {note.content}"


# --- execution ---------------------------------------------------------------


@dataclass(frozen=True)
class _Call:
    actor: Actor
    constellation: Constellation
    args: dict[str, Any]

    def task(self) -> Task:
        return selectors.task_get_for_actor(
            actor=self.actor, task_id=self.args["task_id"]
        )


def _status(call: _Call) -> CoordResult:
    status = selectors.coordination_status_for_actor(
        actor=call.actor, constellation=call.constellation
    )
    counts = ", ".join(f"{n} {s}" for s, n in status.counts.items())
    active = ", ".join(f"@{a.name}" for a in status.active_agents) or "none"
    lines = [
        f"Constellation {status.constellation.name}",
        f"Active agents: {active}",
        f"Tasks: {counts}",
    ]
    if call.actor.agent is not None:
        lines.append("Your tasks:")
        lines += [f"  {task_line(t)}" for t in status.mine] or ["  none"]
        lines.append("Unread handoffs for you:")
        lines += [f"  {handoff_line(n)}" for n in status.inbox] or ["  none"]
    lines.append("Open tasks:")
    lines += [f"  {task_line(t)}" for t in status.open_tasks] or ["  none"]
    if status.notes:
        lines.append("Shared notes (latest last):")
        lines += [f"  [{n['by']}] {n['text']}" for n in status.notes]
    if status.state_keys:
        lines.append(f"State keys: {', '.join(status.state_keys)}")
    return CoordResult(
        "status",
        "\n".join(lines),
        {
            "active_agents": [a.name for a in status.active_agents],
            "task_counts": status.counts,
            "my_tasks": [task_data(t) for t in status.mine],
            "open_tasks": [task_data(t) for t in status.open_tasks],
            "unread_handoffs": [n.pk for n in status.inbox],
            "notes": status.notes,
            "state_keys": status.state_keys,
        },
    )


def _tasks(call: _Call) -> CoordResult:
    which = call.args["filter"]
    qs = selectors.task_list_for_actor(
        actor=call.actor, constellation_id=call.constellation.pk
    ).prefetch_related(None)
    if which == "mine":
        if call.actor.agent is None:
            raise _error("tasks", "'mine' is for agents; use open or all")
        qs = qs.filter(assignee=call.actor.agent)
    elif which == "open":
        qs = qs.filter(status=TaskStatus.OPEN)
    tasks = list(qs)
    text = "\n".join(task_line(t) for t in tasks) or f"no {which} tasks"
    return CoordResult("tasks", text, {"tasks": [task_data(t) for t in tasks]})


def _assign(call: _Call) -> CoordResult:
    agent = selectors.agent_get_by_mention(
        actor=call.actor, constellation=call.constellation, name=call.args["agent"]
    )
    if "task_id" in call.args:
        task = services.task_assign(actor=call.actor, task=call.task(), assignee=agent)
        verb = "assigned"
    else:
        task = services.task_create(
            actor=call.actor,
            constellation=call.constellation,
            title=call.args["title"],
            assignee=agent,
        )
        verb = "created and assigned"
    return CoordResult(
        "assign", f"{verb} {task.ref} to @{agent.name}: {task.title}", task_data(task)
    )


def _claim(call: _Call) -> CoordResult:
    task = services.task_claim(actor=call.actor, task=call.task())
    return CoordResult(
        "claim", f"you claimed {task.ref}; it is in progress", task_data(task)
    )


def _complete(call: _Call) -> CoordResult:
    task = services.task_complete(actor=call.actor, task=call.task())
    return CoordResult("complete", f"{task.ref} is done: {task.title}", task_data(task))


def _block(call: _Call) -> CoordResult:
    task = services.task_block(
        actor=call.actor, task=call.task(), reason=call.args["reason"]
    )
    return CoordResult(
        "block", f"{task.ref} is blocked: {task.blocked_reason}", task_data(task)
    )


def _handoff(call: _Call) -> CoordResult:
    name = call.args["agent"]
    to = (
        None
        if name.lower() == ANYONE
        else selectors.agent_get_by_mention(
            actor=call.actor, constellation=call.constellation, name=name
        )
    )
    note = services.handoff_create(
        actor=call.actor, to_agent=to, content=call.args["content"]
    )
    who = f"@{to.name}" if to else "any agent"
    return CoordResult(
        "handoff",
        f"{note.ref} left for {who}; they see it in their context until they read it",
        {"id": note.pk, "ref": note.ref},
    )


def _note(call: _Call) -> CoordResult:
    state = services.coordination_note_add(
        actor=call.actor,
        constellation=call.constellation,
        text=call.args["text"],
        decision=call.args["decision"],
    )
    kind = "decision" if call.args["decision"] else "noted"
    return CoordResult(
        "note",
        f"{kind} ({len(state.value)} shared notes)",
        {"notes": len(state.value), "version": state.version},
    )


def _read(call: _Call) -> CoordResult:
    note = selectors.handoff_get_for_actor(
        actor=call.actor, handoff_id=call.args["handoff_id"]
    )
    note = services.handoff_mark_read(actor=call.actor, note=note)
    return CoordResult(
        "read", f"{note.ref} marked read", {"id": note.pk, "read_at": note.read_at}
    )


_COMMANDS: dict[str, Callable[[_Call], CoordResult]] = {
    "status": _status,
    "tasks": _tasks,
    "assign": _assign,
    "claim": _claim,
    "complete": _complete,
    "block": _block,
    "handoff": _handoff,
    "note": _note,
    "read": _read,
}


def coord_execute(
    *, actor: Actor, constellation: Constellation, command: CoordCommand
) -> CoordResult:
    return _COMMANDS[command.name](_Call(actor, constellation, command.args))
