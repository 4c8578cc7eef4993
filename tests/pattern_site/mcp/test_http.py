"""The /mcp ASGI app in process: the lifespan the router in front of
Django answers, and Django's host settings carried to the SDK."""

import pytest
from asgiref.testing import ApplicationCommunicator

from pattern_site import asgi
from pattern_site.mcp.http import McpHttpApp, transport_security


async def test_the_lifespan_protocol_starts_and_stops_the_session_manager(
    monkeypatch: pytest.MonkeyPatch,
):
    app = McpHttpApp()
    monkeypatch.setattr(asgi, "mcp_app", app)
    lifespan = ApplicationCommunicator(asgi.application, {"type": "lifespan"})
    await lifespan.send_input({"type": "lifespan.startup"})
    assert await lifespan.receive_output(timeout=10) == {
        "type": "lifespan.startup.complete"
    }
    assert app.session_manager._task_group is not None
    await lifespan.send_input({"type": "lifespan.shutdown"})
    assert await lifespan.receive_output(timeout=10) == {
        "type": "lifespan.shutdown.complete"
    }
    assert app.session_manager._task_group is None


def test_allowed_hosts_become_the_sdks_allowed_hosts_and_origins(settings):
    settings.ALLOWED_HOSTS = ["pattern.example", ".corp.example"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://proxy.example"]
    security = transport_security()
    assert security.enable_dns_rebinding_protection
    assert "pattern.example:*" in security.allowed_hosts
    assert "corp.example" in security.allowed_hosts
    assert "localhost" not in security.allowed_hosts
    assert "https://pattern.example" in security.allowed_origins
    assert "https://proxy.example" in security.allowed_origins


def test_a_wildcard_allowed_host_turns_the_host_check_off(settings):
    settings.ALLOWED_HOSTS = ["*"]
    assert not transport_security().enable_dns_rebinding_protection
