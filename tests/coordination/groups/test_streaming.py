"""Runs stream as Server-Sent Events from a real Daphne; inboxes long-poll."""

import json
import subprocess
import threading
import time

import httpx
import pytest

from pattern_site.kernel.agents.services import agent_token_issue

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def sse_events(response: httpx.Response):
    """(type, data) of each event frame, as they arrive."""
    kind, data = None, None
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[len("event: ") :]
        elif line.startswith("data: "):
            data = json.loads(line[len("data: ") :])
        elif line == "" and kind is not None:
            yield kind, data
            kind, data = None, None


def headers(agent) -> dict[str, str]:
    return {"Authorization": f"Bearer {agent_token_issue(agent=agent).raw}"}


def test_an_external_agent_answers_while_the_caller_watches_the_stream(
    daphne_server, make_group, agents
):
    group = make_group("round_robin", [("Flux", "regular"), ("Pattern", "regular")])
    caller, flux = headers(agents["Pattern"]), headers(agents["Flux"])

    def agent_side() -> None:
        with httpx.Client(base_url=daphne_server, headers=flux, timeout=30) as http:
            # Waits on the server until the message below is routed.
            work = http.get("/api/inbox", params={"wait": 20}).json()
            url = f"/api/deliveries/{work[0]['id']}"
            http.post(f"{url}/chunks", json={"text": "Tuesday "}).raise_for_status()
            http.post(f"{url}/answer", json={"text": "Tuesday 10am"}).raise_for_status()

    worker = threading.Thread(target=agent_side)
    worker.start()
    time.sleep(0.5)  # the agent is waiting before there is anything to take
    seen = []
    http = httpx.Client(base_url=daphne_server, headers=caller, timeout=30)
    with (
        http,
        http.stream(
            "POST",
            f"/api/groups/{group.pk}/messages",
            json={"message": "when do I see the dentist?"},
            headers={"Accept": "text/event-stream"},
        ) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        seen.extend(sse_events(response))
    worker.join(timeout=30)
    assert [k for k, _ in seen] == [
        "Started",
        "AgentStarted",
        "TextChunk",
        "TextChunk",
        "AgentCompleted",
        "Complete",
    ]
    assert seen[2][1]["text"] == "Tuesday " and seen[2][1]["is_final"] is False
    assert seen[-1][1]["agent_responses"][0]["answer"] == "Tuesday 10am"


def test_the_stream_resumes_after_last_event_id(daphne_server, make_group, agents):
    group = make_group("round_robin", [("Flux", "regular")])
    flux = headers(agents["Flux"])
    with httpx.Client(base_url=daphne_server, headers=flux, timeout=30) as http:
        run = http.post(f"/api/groups/{group.pk}/messages", json={"message": "hi"})
        run_id = run.json()["id"]
        work = http.get("/api/inbox").json()
        http.post(f"/api/deliveries/{work[0]['id']}/answer", json={"text": "hello"})
        with http.stream(
            "GET", f"/api/runs/{run_id}/events", headers={"Last-Event-ID": "3"}
        ) as response:
            kinds = [k for k, _ in sse_events(response)]
    assert kinds == ["AgentCompleted", "Complete"]


def test_an_idle_long_poll_returns_an_empty_list_after_its_wait(daphne_server, agents):
    with httpx.Client(
        base_url=daphne_server, headers=headers(agents["Flux"]), timeout=30
    ) as http:
        started = time.monotonic()
        response = http.get("/api/inbox", params={"wait": 1})
        assert response.json() == []
        assert time.monotonic() - started >= 1


def _stream_while_another_process_answers(base_url, group, agents) -> float:
    """Open a run's stream on the server; answer from this test process."""
    from coordination.groups.services import (
        delivery_complete,
        delivery_take,
        group_message_route,
    )
    from pattern_site.kernel.actors import Actor

    run = group_message_route(actor=Actor.system(), group=group, message="hi")

    def answer() -> None:
        time.sleep(0.5)
        delivery = delivery_take(agent=agents["Flux"])[0]
        delivery_complete(delivery=delivery, text="hello")

    worker = threading.Thread(target=answer)
    http = httpx.Client(base_url=base_url, headers=headers(agents["Flux"]))
    with http, http.stream("GET", f"/api/runs/{run.pk}/events", timeout=30) as response:
        worker.start()
        started = time.monotonic()
        kinds = [k for k, _ in sse_events(response)]
        elapsed = time.monotonic() - started
    worker.join()
    assert kinds[-1] == "Complete", kinds
    return elapsed


def test_the_stream_sees_events_written_by_another_process(
    daphne_server, make_group, agents
):
    group = make_group("round_robin", [("Flux", "regular")])
    _stream_while_another_process_answers(daphne_server, group, agents)


@pytest.mark.redis
def test_with_redis_the_stream_is_woken_across_processes(
    redis_url, redis_channel_layer, settings, make_group, agents
):
    from pattern_site.processes import daphne_command, free_port
    from tests.conftest import REPO, subprocess_env, wait_for_port

    # A poll interval far longer than the test: only a wake-up can end it.
    port = free_port()
    proc = subprocess.Popen(
        daphne_command(port=port),
        cwd=REPO,
        env=subprocess_env(
            PATTERN_REDIS_URL=redis_url, PATTERN_GROUPS_POLL_SECONDS="20"
        ),
    )
    try:
        wait_for_port(port, proc=proc)
        group = make_group("round_robin", [("Flux", "regular")])
        elapsed = _stream_while_another_process_answers(
            f"http://127.0.0.1:{port}", group, agents
        )
        assert elapsed < 10
    finally:
        proc.terminate()
        proc.wait(timeout=10)
