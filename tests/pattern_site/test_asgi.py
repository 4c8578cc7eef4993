"""HTTP over ASGI (what Daphne serves) through the project's handler."""

import asyncio
import json
import subprocess
import sys
import threading

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from asgiref.testing import ApplicationCommunicator
from django.conf import settings
from django.core import signals
from django.http import HttpResponse
from django.test import RequestFactory, override_settings
from django.urls import path, resolve

from memory.blocks.selectors import block_value
from memory.blocks.services import block_create
from pattern_site.asgi import django_asgi_app
from pattern_site.kernel.actors import Actor
from tests.conftest import REPO


async def _request(method: str, path: str, body: bytes = b"", headers=()) -> tuple:
    start, bodies = await _exchange(method, path, body, headers)
    return start["status"], b"".join(m.get("body", b"") for m in bodies)


async def _exchange(method: str, path: str, body: bytes = b"", headers=()) -> tuple:
    """The response's start message and its body messages."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 80),
    }
    app = ApplicationCommunicator(django_asgi_app, scope)
    await app.send_input({"type": "http.request", "body": body, "more_body": False})
    start = await app.receive_output(timeout=10)
    bodies = []
    while True:
        message = await app.receive_output(timeout=10)
        bodies.append(message)
        if not message.get("more_body"):
            break
    await app.wait(timeout=10)
    return start, bodies


@pytest.mark.django_db(transaction=True)
async def test_agent_appends_through_the_asgi_handler(agent, agent_token):
    block = await sync_to_async(block_create)(
        actor=Actor.system(), owner=agent, label="notes"
    )
    headers = (
        (b"authorization", f"Bearer {agent_token.raw}".encode()),
        (b"content-type", b"application/json"),
    )
    for word in ("one", "two"):
        body = json.dumps({"operation": "append", "label": "notes", "content": word})
        status, content = await _request(
            "POST", "/api/tools/context", body.encode(), headers
        )
        assert status == 200, content
        assert json.loads(content)["status"] == "applied"

    assert await sync_to_async(block_value)(block=block) == "one\ntwo"
    status, content = await _request(
        "POST",
        "/api/tools/context",
        b"{}",
        ((b"authorization", b"Bearer wrong"), (b"content-type", b"application/json")),
    )
    assert status == 401


@pytest.mark.django_db(transaction=True)
async def test_a_static_file_streams_through_the_asgi_handler():
    status, content = await _request("GET", "/static/js/build.mjs")
    assert status == 200
    assert content == (settings.BASE_DIR / "static/js/build.mjs").read_bytes()


@pytest.mark.django_db(transaction=True)
async def test_request_signals_fire_once_in_the_thread_that_serves(agent_token):
    seen: list[tuple[str, str]] = []

    def started(**kwargs):
        seen.append(("started", threading.current_thread().name))

    def finished(**kwargs):
        seen.append(("finished", threading.current_thread().name))

    signals.request_started.connect(started)
    signals.request_finished.connect(finished)
    try:
        status, _ = await _request(
            "GET",
            "/api/whoami",
            headers=((b"authorization", f"Bearer {agent_token.raw}".encode()),),
        )
    finally:
        signals.request_started.disconnect(started)
        signals.request_finished.disconnect(finished)
    assert status == 200
    assert [kind for kind, _ in seen] == ["started", "finished"]
    assert seen[0][1] == seen[1][1]
    assert seen[0][1].startswith("http")


def _resolved(path: str):
    request = RequestFactory().post(path)
    return django_asgi_app.resolve_request(request), request


def test_a_path_without_arguments_is_resolved_once_others_each_time():
    first, request = _resolved("/api/tools/context")
    again, _ = _resolved("/api/tools/context")
    assert request.resolver_match is first
    assert again is first
    assert first.func is resolve("/api/tools/context").func

    one, _ = _resolved("/api/tasks/1")
    other, _ = _resolved("/api/tasks/2")
    assert one.kwargs != other.kwargs
    assert one is not other


def _other_view(request):
    return HttpResponse("other")


def _loop_view(request):
    # What a request's channel-layer send does (layer_send): await on the
    # server's loop from the request's thread.
    async def running_loop() -> int:
        return id(asyncio.get_running_loop())

    return HttpResponse(str(async_to_sync(running_loop)()))


def _answer_view(request, size):
    response = HttpResponse(b"x" * size, status=201)
    response["X-Answer"] = "yes"
    response.set_cookie("flavour", "plain")
    return response


def _failing_view(request):
    raise RuntimeError("boom")


_waiting = threading.Event()
_released = threading.Event()


def _waiting_view(request):
    # Holds its thread until another request comes through.
    _waiting.set()
    return HttpResponse(str(_released.wait(timeout=10)))


def _releasing_view(request):
    _released.set()
    return HttpResponse("released")


_server_loop: list[asyncio.AbstractEventLoop] = []


def _loop_needing_view(request):
    # Needs the loop to run a callback (not through async_to_sync, which
    # would wake a loop waiting in place): answers whether it ran in time.
    ran = threading.Event()
    _server_loop[0].call_soon_threadsafe(ran.set)
    return HttpResponse(str(ran.wait(timeout=10)))


urlpatterns = [
    path("api/tools/context", _other_view),
    path("loop", _loop_view),
    path("fails", _failing_view),
    path("answer/<int:size>", _answer_view),
    path("waiting", _waiting_view),
    path("releasing", _releasing_view),
    path("loop-needing", _loop_needing_view),
]


@pytest.mark.django_db(transaction=True)
@override_settings(ROOT_URLCONF=__name__)
async def test_a_request_awaits_on_the_servers_loop_from_its_thread():
    status, content = await _request("GET", "/loop")
    assert status == 200
    assert int(content) == id(asyncio.get_running_loop())


@pytest.mark.django_db(transaction=True)
@override_settings(ROOT_URLCONF=__name__)
@pytest.mark.parametrize(
    "size", [0, 10, django_asgi_app.chunk_size, django_asgi_app.chunk_size * 2 + 1]
)
async def test_an_answer_is_sent_with_its_status_headers_cookies_and_body(size):
    start, bodies = await _exchange("GET", f"/answer/{size}")
    assert start["status"] == 201
    headers = start["headers"]
    assert (b"X-Answer", b"yes") in headers
    assert (b"Content-Length", str(size).encode()) in headers
    assert any(
        key == b"Set-Cookie" and value.startswith(b"flavour=plain")
        for key, value in headers
    )
    assert all(isinstance(k, bytes) and isinstance(v, bytes) for k, v in headers)
    assert b"".join(m["body"] for m in bodies) == b"x" * size
    # One message when the answer fits one chunk, as Django sends it.
    assert len(bodies) == max(1, -(-size // django_asgi_app.chunk_size))
    assert [m["more_body"] for m in bodies] == [True] * (len(bodies) - 1) + [False]


@pytest.mark.django_db(transaction=True)
@override_settings(ROOT_URLCONF=__name__, DEBUG_PROPAGATE_EXCEPTIONS=False)
async def test_an_exception_in_a_view_is_a_500_from_the_thread():
    status, _ = await _request("GET", "/fails")
    assert status == 500
    status, _ = await _request("GET", "/loop")
    assert status == 200


@pytest.mark.django_db(transaction=True)
@override_settings(ROOT_URLCONF=__name__)
async def test_a_request_past_the_loops_wait_does_not_hold_the_next_back():
    _waiting.clear()
    _released.clear()
    waiting = asyncio.ensure_future(_request("GET", "/waiting"))
    assert await asyncio.to_thread(_waiting.wait, 10)
    releasing = await _request("GET", "/releasing")
    assert releasing == (200, b"released")
    assert await waiting == (200, b"True")


@pytest.mark.django_db(transaction=True)
@override_settings(ROOT_URLCONF=__name__)
async def test_the_loop_waits_in_place_only_while_no_other_request_runs(
    monkeypatch,
):
    """A request that comes while another runs on the threads starts beside
    it and the loop goes on: it does not wait in place for the newcomer."""
    _waiting.clear()
    _released.clear()
    _server_loop[:] = [asyncio.get_running_loop()]
    waiting = asyncio.ensure_future(_request("GET", "/waiting"))
    assert await asyncio.to_thread(_waiting.wait, 10)
    monkeypatch.setattr(django_asgi_app, "loop_wait_seconds", 30)
    assert await _request("GET", "/loop-needing") == (200, b"True")
    _released.set()
    assert await waiting == (200, b"True")


@pytest.mark.django_db(transaction=True)
@override_settings(ROOT_URLCONF=__name__)
async def test_a_request_that_needs_the_loop_wakes_it_from_its_wait(monkeypatch):
    monkeypatch.setattr(django_asgi_app, "loop_wait_seconds", 30)
    loop = asyncio.get_running_loop()
    started = loop.time()
    status, content = await _request("GET", "/loop")
    assert (status, int(content)) == (200, id(loop))
    # Well within the 30 s the loop would otherwise wait in place.
    assert loop.time() - started < 5


@pytest.mark.django_db(transaction=True)
@override_settings(ROOT_URLCONF=__name__)
async def test_a_request_finished_within_the_loops_wait_answers_as_before(
    monkeypatch,
):
    monkeypatch.setattr(django_asgi_app, "loop_wait_seconds", 30)
    assert await _request("GET", "/answer/3") == (201, b"xxx")
    status, _ = await _request("GET", "/fails")
    assert status == 500


def test_a_remembered_path_follows_a_new_root_urlconf():
    _resolved("/api/tools/context")
    with override_settings(ROOT_URLCONF=__name__):
        match, _ = _resolved("/api/tools/context")
        assert match.func is _other_view
    match, _ = _resolved("/api/tools/context")
    assert match.func is not _other_view


def test_the_asgi_module_has_daphne_leave_request_bodies_unparsed():
    # In a process of its own: another test may have asked for it already.
    probe = (
        "import pattern_site.asgi\n"
        "from daphne.http_protocol import WebRequest\n"
        "print(getattr(WebRequest, 'bodies_unparsed', False))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == "True"
