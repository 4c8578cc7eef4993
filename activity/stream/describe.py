"""The one line an event reads as, in context, the feed and the digest."""

from typing import Any

from activity.stream.models import EventType

SUMMARY_CHARS = 160
SYSTEM = "System"
FILE_VERBS = {
    "open": "opened",
    "read": "read",
    "next": "read on in",
    "prev": "read back in",
}


def _short(value: Any) -> str:
    text = " ".join(str(value or "").split())
    if len(text) > SUMMARY_CHARS:
        return text[: SUMMARY_CHARS - 1] + "…"
    return text


def _with(text: str, extra: Any) -> str:
    extra = _short(extra)
    return f"{text}: {extra}" if extra else text


def _task(d: dict[str, Any]) -> str:
    """A task as a person looks for it: by its title, with its ref."""
    title = _short(d.get("title"))
    ref = d.get("task", "")
    if not title:
        return f"task {ref or '?'}"
    return f'task "{title}"' + (f" ({ref})" if ref else "")


def _run(d: dict[str, Any]) -> str:
    pattern = d.get("pattern", "").replace("_", " ")
    return f"{pattern} run" if pattern else "run"


def event_line(
    *, who: str, subject: str, event_type: str, details: dict[str, Any]
) -> str:
    """``who`` acted; ``subject`` is the agent concerned (``who`` when the
    agent acted itself)."""
    d = details
    by = f" by {who}" if who not in (subject, SYSTEM) else ""
    match event_type:
        case EventType.AGENT_ACTIVATED:
            return _with(f"{subject} was activated{by}", d.get("reason"))
        case EventType.AGENT_DEACTIVATED:
            return _with(f"{subject} was deactivated{by}", d.get("reason"))
        case EventType.MESSAGE_RECEIVED:
            return _with(
                f"{who} received a message from {d.get('source', 'someone')}",
                d.get("summary"),
            )
        case EventType.MESSAGE_SENT:
            return _with(
                f"{who} sent a message to {d.get('target', 'someone')}",
                d.get("summary"),
            )
        case EventType.TOOL_EXECUTED:
            failed = "" if d.get("success", True) else " (failed)"
            return f"{who} ran {d.get('tool', 'a tool')}{failed}"
        case EventType.MEMORY_BLOCK_UPDATED:
            # Whose block it is matters most when someone else changed it.
            whose = f"{subject}'s" if subject not in (who, SYSTEM, "") else "the"
            block = f"{whose} {d.get('label', '?')} block"
            change = d.get("change_type", "update")
            if change == "create":
                return f"{who} created {block}"
            return _with(f"{who} updated {block} ({change})", d.get("summary"))
        case EventType.FILE_ACCESSED:
            # ``path`` is the file as cited to agents: "<folder>/<path>".
            verb = FILE_VERBS.get(d.get("how", ""), "read")
            lines = f" (lines {d['lines']})" if d.get("lines") else ""
            return f"{who} {verb} {d.get('path', 'a file')}{lines}"
        case EventType.TASK_ASSIGNED:
            return (
                f"{who} assigned {_task(d)} to "
                f"{d.get('assignee_name', d.get('assignee', '?'))}"
            )
        case EventType.TASK_CREATED:
            return f"{who} created {_task(d)}"
        case EventType.TASK_COMPLETED:
            return f"{who} completed {_task(d)}"
        case EventType.TASK_BLOCKED:
            return _with(f"{who} marked {_task(d)} blocked", d.get("reason"))
        case EventType.TASK_CANCELLED:
            return f"{who} cancelled {_task(d)}"
        case EventType.GROUP_RUN_STARTED:
            return _with(
                f"{who} started a {_run(d)} of the group {d.get('group', '?')}",
                d.get("summary"),
            )
        case EventType.GROUP_RUN_COMPLETED:
            return _with(
                f"The group {d.get('group', '?')}'s {_run(d)} "
                f"{d.get('outcome', 'ended')}",
                d.get("summary"),
            )
        case EventType.AGENT_TURN:
            calls = d.get("tool_calls", 0)
            return (
                f"{who} took a turn with {calls} tool call{'' if calls == 1 else 's'}"
                f" ({d.get('outcome', 'done')})"
            )
        case EventType.CONSOLIDATION_RUN:
            whose = f"{subject}'s" if subject not in (who, SYSTEM, "") else "the"
            return (
                f"{who} consolidated {whose} memory: {d.get('promoted', 0)} "
                f"promoted, {d.get('merged', 0)} merged, "
                f"{d.get('contradicted', 0)} contradicted, {d.get('pruned', 0)} "
                f"pruned, {d.get('capped', 0)} over the cap"
            )
        case EventType.HANDOFF_INITIATED:
            return _with(
                f"{who} handed off to {d.get('to_name', d.get('to', '?'))}",
                d.get("summary"),
            )
        case EventType.NOTABLE:
            return _with(f"{who} flagged", d.get("description"))
    return _with(f"{who}: {event_type}", d.get("summary"))
