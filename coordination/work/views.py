"""Dashboard pages of coordination work: the task board and the handoff
inbox.  Reads go through the work selectors, each form post calls one
service (errors come back as a message on the page, see
``pattern_site.kernel.web.form_action``); dragging a card calls the tool API."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from coordination.work import selectors, services
from coordination.work.models import TaskPriority
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


@form_action
def create_task(request: HttpRequest, constellation_id: int) -> HttpResponse:
    actor = _actor(request)
    constellation = selectors.work_constellation_for_actor(
        actor=actor, constellation_id=constellation_id
    )
    post = request.POST
    due_at = parse_datetime(post.get("due_at") or "")
    if post.get("due_at") and due_at is None:
        raise InvalidInput(f"due date {post['due_at']!r} is not a date and time")
    if due_at is not None and timezone.is_naive(due_at):
        due_at = timezone.make_aware(due_at)
    assignee_id = post.get("assignee_id")
    parent_id = post.get("parent_id")
    priority = post.get("priority", str(TaskPriority.NORMAL))
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
        priority=int(priority) if priority.isdigit() else TaskPriority.NORMAL,
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
        due_at=due_at,
    )
    messages.success(request, f"Created {task.ref}.")
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
