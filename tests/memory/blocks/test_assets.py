"""The browser bundle of the co-editor is built and served correctly."""

from django.test import Client


def test_loro_wasm_is_served_as_application_wasm(built_assets, db):
    response = Client().get("/static/dist/loro_wasm_bg.wasm")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/wasm"
    body = b"".join(response.streaming_content)
    assert body[:4] == b"\0asm"


def test_editor_bundle_is_served_as_javascript(built_assets, db):
    response = Client().get("/static/dist/block_editor.js")
    assert response.status_code == 200
    assert "javascript" in response["Content-Type"]
