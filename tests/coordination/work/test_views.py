"""The task board and handoff inbox pages."""

import pytest
from django.test import Client

from coordination.work.models import HandoffNote, Task
from coordination.work.selectors import BOARD_FINISHED_LIMIT
from coordination.work.services import handoff_create, task_status_set
from pattern_site.kernel.actors import Actor
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_board_shows_each_task_in_its_status_column_with_links(
    human_client, constellation, make_task, partner, agent
):
    parent = make_task("refactor memory")
    step = make_task("step 1", parent=parent, assignee=agent, dependencies=[parent])
    task_status_set(
        actor=Actor.for_user(partner), task=parent, status="blocked", reason="waiting"
    )
    page = human_client.get(f"/constellations/{constellation.pk}/tasks/")
    assert page.status_code == 200
    html = page.content.decode()
    blocked = html.index('data-testid="column-blocked"')
    done = html.index('data-testid="column-done"')
    assert blocked < html.index(f'data-testid="task-{parent.pk}"') < done
    assert f"subtask of {parent.ref}" in html
    assert 'Depends on <span class="dep dep-blocked"' in html
    assert "Blocked: waiting" in html
    assert "@Entropy" in html
    assert f'data-testid="task-{step.pk}"' in html


def test_board_form_creates_a_task_and_bad_input_stores_nothing(
    human_client, constellation, agent
):
    url = f"/constellations/{constellation.pk}/tasks/new/"
    response = human_client.post(
        url, {"title": "call the bank", "assignee_id": agent.pk, "priority": "3"}
    )
    assert response.status_code == 302
    task = Task.objects.get()
    assert (task.title, task.assignee, task.priority) == ("call the bank", agent, 3)
    human_client.post(
        url,
        {"title": "pay", "depends_on": [task.pk], "due_at": "2026-12-01T09:30"},
    )
    pay = Task.objects.get(title="pay")
    assert list(pay.dependencies.all()) == [task]
    assert pay.due_at.isoformat() == "2026-12-01T09:30:00+00:00"
    response = human_client.post(url, {"title": "y", "due_at": "soon"}, follow=True)
    assert (
        "due date &#x27;soon&#x27; is not a date and time" in response.content.decode()
    )
    response = human_client.post(url, {"title": "  "}, follow=True)
    assert "a task needs a title" in response.content.decode()
    response = human_client.post(url, {"title": "x", "priority": "9"}, follow=True)
    assert "priority: Value 9 is not a valid choice." in response.content.decode()
    response = human_client.post(url, {"title": "x" * 201}, follow=True)
    assert "title: Ensure this value has at most 200" in response.content.decode()
    assert Task.objects.count() == 2


def test_board_of_another_constellation_is_404(constellation, make_task):
    client = Client()
    client.force_login(UserFactory(username="stranger"))
    task = make_task()
    assert client.get(f"/constellations/{constellation.pk}/tasks/").status_code == 404
    assert client.get(f"/tasks/{task.pk}/card/").status_code == 404


def test_handoff_inbox_marks_a_note_read(human_client, constellation, agent, flux):
    note = handoff_create(
        actor=Actor.for_agent(flux), to_agent=agent, content="left off at step 3"
    )
    url = f"/constellations/{constellation.pk}/handoffs/"
    html = human_client.get(url).content.decode()
    assert "left off at step 3" in html
    assert html.index("left off at step 3") < html.index("Mark read")
    response = human_client.post(f"/handoffs/{note.pk}/read/")
    assert response.status_code == 302
    assert HandoffNote.objects.get().read_at is not None
    html = human_client.get(url).content.decode()
    assert "No unread handoffs." in html
    assert "left off at step 3" in html


def test_board_lists_only_the_latest_finished_tasks_but_counts_all(
    human_client, constellation, make_task, partner
):
    actor = Actor.for_user(partner)
    tasks = [make_task(f"t{n}") for n in range(BOARD_FINISHED_LIMIT + 2)]
    for task in tasks:
        task_status_set(actor=actor, task=task, status="done")
    html = human_client.get(f"/constellations/{constellation.pk}/tasks/").content
    html = html.decode()
    done = html[html.index('data-testid="column-done"') :]
    done = done[: done.index("</section>")]
    assert f"data-column-count>{BOARD_FINISHED_LIMIT + 2}<" in done
    assert done.count("data-task-card") == BOARD_FINISHED_LIMIT
    assert f'data-testid="task-{tasks[-1].pk}"' in done
    assert f'data-testid="task-{tasks[0].pk}"' not in done
