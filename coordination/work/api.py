"""Task, handoff and coordination-state endpoints of the tool API (the
``/coord`` dialect tool is declared in ``coordination.work.tools``).
Thin: resolve what the request names through the selectors, call one
service, shape the answer."""

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Query, Router, Status

from coordination.work import selectors, services
from coordination.work.schemas import (
    HandoffIn,
    HandoffOut,
    StateIn,
    StateKey,
    StateOut,
    TaskAssignIn,
    TaskCreateIn,
    TaskDependencyIn,
    TaskOut,
    TaskStatusIn,
)
from pattern_site.kernel.agents.selectors import agent_get_for_actor
from pattern_site.kernel.apitypes import LINE_MAX, Id, error_responses
from pattern_site.kernel.auth import request_actor

router = Router(tags=["tasks"])


# --- tasks ---------------------------------------------------------------------


@router.get(
    "/tasks",
    response={200: list[TaskOut], **error_responses(403, 404, body=False)},
    summary="List tasks",
)
def list_tasks(
    request: HttpRequest,
    constellation_id: Id | None = None,
    status: Annotated[str | None, Query(max_length=LINE_MAX)] = None,
    assignee_id: Id | None = None,
) -> Any:
    """Filter with `status` (comma-separated) and `assignee_id`."""
    return selectors.task_list_for_actor(
        actor=request_actor(request),
        constellation_id=constellation_id,
        statuses=status.split(",") if status else (),
        assignee_id=assignee_id,
    )


@router.post(
    "/tasks",
    response={201: TaskOut, **error_responses(403, 404, 409, body=True)},
    summary="Create a task",
)
def create_task(request: HttpRequest, payload: TaskCreateIn) -> Any:
    actor = request_actor(request)
    constellation = selectors.work_constellation_for_actor(
        actor=actor, constellation_id=payload.constellation_id
    )
    task = services.task_create(
        actor=actor,
        constellation=constellation,
        title=payload.title,
        description=payload.description,
        assignee=(
            agent_get_for_actor(actor=actor, agent_id=payload.assignee_id)
            if payload.assignee_id is not None
            else None
        ),
        priority=payload.priority,
        parent=(
            selectors.task_get_for_actor(actor=actor, task_id=payload.parent_id)
            if payload.parent_id is not None
            else None
        ),
        dependencies=[
            selectors.task_get_for_actor(actor=actor, task_id=pk)
            for pk in payload.depends_on
        ],
        due_at=payload.due_at,
    )
    return Status(201, selectors.task_get_for_actor(actor=actor, task_id=task.pk))


@router.get(
    "/tasks/{task_id}",
    response={200: TaskOut, **error_responses(404, body=False)},
    summary="Get a task",
)
def get_task(request: HttpRequest, task_id: Id) -> Any:
    return selectors.task_get_for_actor(actor=request_actor(request), task_id=task_id)


@router.post(
    "/tasks/{task_id}/assign",
    response={200: TaskOut, **error_responses(403, 404, 409, body=True)},
    summary="Assign a task",
)
def assign_task(request: HttpRequest, task_id: Id, payload: TaskAssignIn) -> Any:
    actor = request_actor(request)
    task = selectors.task_get_for_actor(actor=actor, task_id=task_id)
    assignee = (
        agent_get_for_actor(actor=actor, agent_id=payload.assignee_id)
        if payload.assignee_id is not None
        else None
    )
    services.task_assign(actor=actor, task=task, assignee=assignee)
    return selectors.task_get_for_actor(actor=actor, task_id=task_id)


@router.post(
    "/tasks/{task_id}/claim",
    response={200: TaskOut, **error_responses(403, 404, 409, body=False)},
    summary="Claim a task",
)
def claim_task(request: HttpRequest, task_id: Id) -> Any:
    """The calling agent takes an open task and starts it; 409 when another
    agent got it first."""
    actor = request_actor(request)
    task = selectors.task_get_for_actor(actor=actor, task_id=task_id)
    services.task_claim(actor=actor, task=task)
    return selectors.task_get_for_actor(actor=actor, task_id=task_id)


@router.post(
    "/tasks/{task_id}/status",
    response={200: TaskOut, **error_responses(403, 404, 409, body=True)},
    summary="Change a task's status",
)
def change_task_status(request: HttpRequest, task_id: Id, payload: TaskStatusIn) -> Any:
    """Start, block (with a reason), complete, cancel or reopen; 409 when the
    task's current status does not allow the move."""
    actor = request_actor(request)
    task = selectors.task_get_for_actor(actor=actor, task_id=task_id)
    services.task_status_set(
        actor=actor, task=task, status=payload.status, reason=payload.reason
    )
    return selectors.task_get_for_actor(actor=actor, task_id=task_id)


@router.post(
    "/tasks/{task_id}/dependencies",
    response={200: TaskOut, **error_responses(403, 404, 409, body=True)},
    summary="Add a dependency",
)
def add_task_dependency(
    request: HttpRequest, task_id: Id, payload: TaskDependencyIn
) -> Any:
    actor = request_actor(request)
    task = selectors.task_get_for_actor(actor=actor, task_id=task_id)
    depends_on = selectors.task_get_for_actor(actor=actor, task_id=payload.depends_on)
    services.task_dependency_add(actor=actor, task=task, depends_on=depends_on)
    return selectors.task_get_for_actor(actor=actor, task_id=task_id)


@router.delete(
    "/tasks/{task_id}/dependencies/{depends_on_id}",
    response={200: TaskOut, **error_responses(403, 404, 409, body=False)},
    summary="Remove a dependency",
)
def remove_task_dependency(request: HttpRequest, task_id: Id, depends_on_id: Id) -> Any:
    actor = request_actor(request)
    task = selectors.task_get_for_actor(actor=actor, task_id=task_id)
    depends_on = selectors.task_get_for_actor(actor=actor, task_id=depends_on_id)
    services.task_dependency_remove(actor=actor, task=task, depends_on=depends_on)
    return selectors.task_get_for_actor(actor=actor, task_id=task_id)


# --- handoffs ------------------------------------------------------------------


@router.get(
    "/handoffs",
    response={200: list[HandoffOut], **error_responses(403, 404, body=False)},
    summary="List handoff notes",
)
def list_handoffs(
    request: HttpRequest, constellation_id: Id | None = None, unread: bool = False
) -> Any:
    """An agent sees notes to it, to anyone and from it; `unread=true` keeps
    the unread ones."""
    return selectors.handoff_list_for_actor(
        actor=request_actor(request),
        constellation_id=constellation_id,
        unread_only=unread,
    )


@router.post(
    "/handoffs",
    response={201: HandoffOut, **error_responses(403, 404, body=True)},
    summary="Leave a handoff",
)
def create_handoff(request: HttpRequest, payload: HandoffIn) -> Any:
    actor = request_actor(request)
    to_agent = (
        agent_get_for_actor(actor=actor, agent_id=payload.to_agent_id)
        if payload.to_agent_id is not None
        else None
    )
    note = services.handoff_create(
        actor=actor, to_agent=to_agent, content=payload.content
    )
    return Status(201, note)


@router.post(
    "/handoffs/{handoff_id}/read",
    response={200: HandoffOut, **error_responses(403, 404, body=False)},
    summary="Mark a handoff read",
)
def read_handoff(request: HttpRequest, handoff_id: Id) -> Any:
    actor = request_actor(request)
    note = selectors.handoff_get_for_actor(actor=actor, handoff_id=handoff_id)
    return services.handoff_mark_read(actor=actor, note=note)


# --- coordination state --------------------------------------------------------


@router.get(
    "/coordination/state",
    response={200: list[StateOut], **error_responses(403, 404, body=False)},
    summary="List shared state",
)
def list_state(request: HttpRequest, constellation_id: Id | None = None) -> Any:
    actor = request_actor(request)
    constellation = selectors.work_constellation_for_actor(
        actor=actor, constellation_id=constellation_id
    )
    return selectors.coordination_state_list_for_actor(
        actor=actor, constellation_id=constellation.pk
    )


@router.get(
    "/coordination/state/{key}",
    response={200: StateOut, **error_responses(403, 404, body=False)},
    summary="Read a shared state key",
)
def get_state(
    request: HttpRequest, key: StateKey, constellation_id: Id | None = None
) -> Any:
    actor = request_actor(request)
    constellation = selectors.work_constellation_for_actor(
        actor=actor, constellation_id=constellation_id
    )
    return selectors.coordination_state_get_for_actor(
        actor=actor, constellation=constellation, key=key
    )


@router.put(
    "/coordination/state/{key}",
    response={200: StateOut, **error_responses(403, 404, 409, body=True)},
    summary="Write a shared state key (compare-and-set)",
)
def put_state(
    request: HttpRequest,
    key: StateKey,
    payload: StateIn,
    constellation_id: Id | None = None,
) -> Any:
    """`version` is the version you read (0 to create the key); 409 with the
    current value when someone wrote it since."""
    actor = request_actor(request)
    constellation = selectors.work_constellation_for_actor(
        actor=actor, constellation_id=constellation_id
    )
    return services.coordination_state_set(
        actor=actor,
        constellation=constellation,
        key=key,
        value=payload.value,
        expected_version=payload.version,
    )
