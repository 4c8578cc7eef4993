"""Dashboard pages of coordination work: the task board, a task's page and
the handoff inbox.  Reads go through the work selectors, each form post calls one
service (errors come back as a message on the page, see
``pattern_site.kernel.web.form_action``); dragging a card calls the tool API."""

from datetime import datetime

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from coordination.work import selectors, services
from coordination.work.models import (
    TASK_TRANSITIONS,
    Task,
    TaskPriority,
    TaskStatus,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.selectors import (
    agent_get_for_actor,
    agent_list_for_actor,
)
from pattern_site.kernel.errors import InvalidInput
from pattern_site.kernel.web import form_action


def _actor(request: HttpRequest) -> Actor:
    return Actor.for_user(request.user)


@login_required
def task_board_page(request: HttpRequest, constellation_id: int) -> HttpResponse:
    actor = _actor(request)
    constellation = selectors.work_constellation_for_actor(
        actor=actor, constellation_id=constellation_id
    )
    columns = selectors.task_board_for_actor(actor=actor, constellation=constellation)
    return render(
        request,
        "work/board.html",
        {
            "constellation": constellation,
            "columns": columns,
            "agents": agent_list_for_actor(
                actor=actor, constellation_id=constellation.pk
            ),
            "parents": [t for column in columns[:3] for t in column.tasks],
            "priorities": TaskPriority.choices,
        },
    )


@login_required
def task_card_fragment(request: HttpRequest, task_id: int) -> HttpResponse:
    """One card, for the board to swap in when a task changes."""
    task = selectors.task_get_for_actor(actor=_actor(request), task_id=task_id)
    return render(request, "work/_task_card.html", {"task": task})


def _due_at(post: QueryDict) -> datetime | None:
    due_at = parse_datetime(post.get("due_at") or "")
    if post.get("due_at") and due_at is None:
        raise InvalidInput(
            f"due date {post['due_at']!r} is not a date and time",
            extra={"field": "due_at"},
        )
    if due_at is not None and timezone.is_naive(due_at):
        due_at = timezone.make_aware(due_at)
    return due_at


def _priority(post: QueryDict) -> int:
    # An unknown number is the model's to refuse, with the choices it knows.
    priority = post.get("priority", "")
    return int(priority) if priority.isdigit() else TaskPriority.NORMAL


# A task page's buttons: each status a task can move to, as a verb.
MOVES = [
    (TaskStatus.IN_PROGRESS, "Start"),
    (TaskStatus.DONE, "Complete"),
    (TaskStatus.OPEN, "Reopen"),
    (TaskStatus.CANCELLED, "Cancel"),
]


def _task(request: HttpRequest, task_id: int) -> Task:
    return selectors.task_get_for_actor(actor=_actor(request), task_id=task_id)


def _to_task(task: Task) -> HttpResponse:
    return redirect(reverse("work:task", args=[task.pk]))


@login_required
def task_page(request: HttpRequest, task_id: int) -> HttpResponse:
    actor = _actor(request)
    task = _task(request, task_id)
    return render(
        request,
        "work/task.html",
        {
            "constellation": task.constellation,
            "task": task,
            "agents": agent_list_for_actor(
                actor=actor, constellation_id=task.constellation_id
            ),
            "priorities": TaskPriority.choices,
            "moves": [
                (status, label)
                for status, label in MOVES
                if status in TASK_TRANSITIONS[task.status]
            ],
            "may_block": TaskStatus.BLOCKED in TASK_TRANSITIONS[task.status],
            "candidates": selectors.task_dependency_candidates(actor=actor, task=task),
            "history": selectors.task_history(actor=actor, task=task),
        },
    )


@form_action
def edit_task(request: HttpRequest, task_id: int) -> HttpResponse:
    task = services.task_edit(
        actor=_actor(request),
        task=_task(request, task_id),
        title=request.POST.get("title", ""),
        description=request.POST.get("description", ""),
        priority=_priority(request.POST),
        due_at=_due_at(request.POST),
    )
    messages.success(request, f"Saved {task.ref}.")
    return _to_task(task)


@form_action
def set_task_status(request: HttpRequest, task_id: int) -> HttpResponse:
    task = services.task_status_set(
        actor=_actor(request),
        task=_task(request, task_id),
        status=request.POST.get("status", ""),
        reason=request.POST.get("reason", ""),
    )
    messages.success(request, f"{task.ref} is {task.get_status_display().lower()}.")
    return _to_task(task)


@form_action
def assign_task(request: HttpRequest, task_id: int) -> HttpResponse:
    actor = _actor(request)
    assignee_id = request.POST.get("assignee_id", "")
    task = services.task_assign(
        actor=actor,
        task=_task(request, task_id),
        assignee=(
            agent_get_for_actor(actor=actor, agent_id=int(assignee_id))
            if assignee_id.isdigit()
            else None
        ),
    )
    who = f"@{task.assignee.name}" if task.assignee else "nobody"
    messages.success(request, f"{task.ref} is assigned to {who}.")
    return _to_task(task)


@form_action
def add_task_dependency(request: HttpRequest, task_id: int) -> HttpResponse:
    depends_on = request.POST.get("depends_on", "")
    if not depends_on.isdigit():
        raise InvalidInput("pick the task this one waits for")
    task = services.task_dependency_add(
        actor=_actor(request),
        task=_task(request, task_id),
        depends_on=_task(request, int(depends_on)),
    )
    return _to_task(task)


@form_action
def remove_task_dependency(
    request: HttpRequest, task_id: int, depends_on_id: int
) -> HttpResponse:
    task = services.task_dependency_remove(
        actor=_actor(request),
        task=_task(request, task_id),
        depends_on=_task(request, depends_on_id),
    )
    return _to_task(task)


@form_action
def create_task(request: HttpRequest, constellation_id: int) -> HttpResponse:
    actor = _actor(request)
    constellation = selectors.work_constellation_for_actor(
        actor=actor, constellation_id=constellation_id
    )
    post = request.POST
    assignee_id = post.get("assignee_id")
    parent_id = post.get("parent_id")
    task = services.task_create(
        actor=actor,
        constellation=constellation,
        title=post.get("title", ""),
        description=post.get("description", ""),
        assignee=(
            agent_get_for_actor(actor=actor, agent_id=int(assignee_id))
            if assignee_id and assignee_id.isdigit()
            else None
        ),
        priority=_priority(post),
        parent=(
            selectors.task_get_for_actor(actor=actor, task_id=int(parent_id))
            if parent_id and parent_id.isdigit()
            else None
        ),
        dependencies=[
            selectors.task_get_for_actor(actor=actor, task_id=int(pk))
            for pk in post.getlist("depends_on")
            if pk.isdigit()
        ],
        due_at=_due_at(post),
    )
    messages.success(request, f"Created {task.ref}.")
    if task.parent is not None:
        return _to_task(task.parent)
    return redirect(reverse("work:board", args=[constellation.pk]))


@login_required
def handoff_inbox_page(request: HttpRequest, constellation_id: int) -> HttpResponse:
    actor = _actor(request)
    constellation = selectors.work_constellation_for_actor(
        actor=actor, constellation_id=constellation_id
    )
    notes = selectors.handoff_list_for_actor(
        actor=actor, constellation_id=constellation.pk
    ).order_by("-created_at")
    return render(
        request,
        "work/handoffs.html",
        {
            "constellation": constellation,
            "unread": [n for n in notes if n.read_at is None],
            "read": [n for n in notes if n.read_at is not None],
        },
    )


@form_action
def read_handoff(request: HttpRequest, handoff_id: int) -> HttpResponse:
    actor = _actor(request)
    note = selectors.handoff_get_for_actor(actor=actor, handoff_id=handoff_id)
    services.handoff_mark_read(actor=actor, note=note)
    messages.success(request, f"Marked {note.ref} read.")
    return redirect(reverse("work:handoffs", args=[note.constellation_id]))
