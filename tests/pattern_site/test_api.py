"""The tool API as a whole: one JSON error shape under /api/, the request
body parser, authentication answers and inputs that used to be 500s."""

import json
from typing import Any

import pytest
from django.test import Client

from memory.blocks.services import block_create
from memory.longterm.services import conversation_start
from memory.models import ArchivalEntry, Conversation, MemoryBlock, Message
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.apitypes import LABEL_PATTERN

J = "application/json"


def raw_post(client: Client, url: str, body: str | bytes) -> Any:
    return client.post(url, body, content_type=J)


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["code"] == code, body
    assert isinstance(body["detail"], str) and body["detail"]
    return body


# --- the error shape ------------------------------------------------------------


def test_token_less_post_is_401_telling_how_to_authenticate(db: None):
    body = assert_error(
        raw_post(Client(enforce_csrf_checks=True), "/api/conversations", "{}"),
        401,
        "auth_required",
    )
    assert "Authorization: Bearer <token>" in body["detail"]


def test_session_post_without_csrf_token_is_a_json_403(partner_client: Client):
    body = assert_error(
        raw_post(partner_client, "/api/conversations", "{}"), 403, "csrf_failed"
    )
    assert "X-CSRFToken" in body["detail"]


def test_unknown_path_under_api_is_a_json_404(agent_client: Client):
    body = assert_error(agent_client.get("/api/no-such-thing"), 404, "not_found")
    assert "/api/docs" in body["detail"]


def test_wrong_method_is_a_json_405_naming_the_allowed_ones(agent_client: Client):
    response = agent_client.put("/api/blocks", "{}", content_type=J)
    body = assert_error(response, 405, "method_not_allowed")
    assert "GET" in body["detail"] and "POST" in body["detail"]
    assert "GET" in response["Allow"]


def test_validation_errors_list_field_paths_without_the_payload_wrapper(
    agent_client: Client,
):
    body = assert_error(
        raw_post(agent_client, "/api/blocks", json.dumps({"label": 5})),
        422,
        "validation_error",
    )
    assert body["errors"][0]["loc"] == ["body", "label"]
    assert body["detail"].startswith("body.label:")


def test_domain_errors_keep_their_code_and_extra_facts(agent_client: Client, agent):
    block_create(actor=Actor.system(), owner=agent, label="notes", char_limit=10)
    response = raw_post(
        agent_client,
        "/api/tools/core_memory_append",
        json.dumps({"label": "notes", "content": "x" * 50}),
    )
    body = assert_error(response, 422, "limit_exceeded")
    assert body["limit"] == 10


def test_context_build_works_with_no_body(agent_client: Client, agent):
    response = agent_client.generic("POST", "/api/context/build", b"")
    assert response.status_code == 200, response.content
    assert agent.name in response.json()["system_prompt"]


# --- bodies the parser refuses ----------------------------------------------


@pytest.mark.parametrize("body", ["-43874", "null", '"str"', "[]", "true"])
def test_a_body_that_is_not_a_json_object_is_refused(agent_client: Client, body: str):
    response = raw_post(agent_client, "/api/conversations", body)
    assert_error(response, 400, "malformed_body")
    assert "JSON object" in response.json()["detail"]
    assert not Conversation.objects.exists()


def test_malformed_json_and_bad_utf8_are_400(agent_client: Client):
    assert_error(raw_post(agent_client, "/api/archival", "{bad"), 400, "malformed_body")
    body = assert_error(
        raw_post(agent_client, "/api/archival", b'{"content": "\xff\xfe"}'),
        400,
        "malformed_body",
    )
    assert "UTF-8" in body["detail"]
    assert not ArchivalEntry.objects.exists()


@pytest.mark.parametrize(
    "url,body",
    [
        ("/api/archival", {"content": "x\ud800y"}),
        ("/api/archival", {"content": "fine", "tags": ["a\udc00"]}),
        ("/api/archival", {"content": "fine", "metadata": {"k\ud800": 1}}),
        ("/api/tools/search", {"query": "x\ud800y"}),
        ("/api/tools/core_memory_append", {"label": "notes", "content": "\ud800"}),
        ("/api/blocks", {"label": "a\x00b"}),
        ("/api/archival", {"content": "nul \x00 inside"}),
        ("/api/tools/search", {"query": "\x00 nul"}),
    ],
)
def test_lone_surrogates_and_nul_characters_are_refused_and_nothing_stored(
    agent_client: Client, agent, url: str, body: dict[str, Any]
):
    block_create(actor=Actor.system(), owner=agent, label="notes")
    versions = MemoryBlock.objects.get(label="notes").version
    response = raw_post(agent_client, url, json.dumps(body))
    assert_error(response, 422, "invalid_input")
    assert not ArchivalEntry.objects.exists()
    assert list(MemoryBlock.objects.values_list("label", flat=True)) == ["notes"]
    assert MemoryBlock.objects.get(label="notes").version == versions


def test_lone_surrogate_in_a_message_is_refused(agent_client: Client, agent):
    conversation = conversation_start(agent=agent)
    response = raw_post(
        agent_client,
        f"/api/conversations/{conversation.pk}/messages",
        json.dumps({"messages": [{"role": "user", "content": "hi \udfff"}]}),
    )
    assert_error(response, 422, "invalid_input")
    assert not Message.objects.exists()


# --- integers, labels and datetimes at the edges -----------------------------


@pytest.mark.parametrize(
    "url",
    [
        "/api/agents?constellation_id=9223372036854775808",
        "/api/archival?offset=9223372036854775808",
        "/api/archival?agent_id=99999999999999999999999",
        "/api/agents/9223372036854775808",
        "/api/conversations/9223372036854775808/messages?after=1",
        "/api/conversations/1/messages?after=9223372036854775808",
    ],
)
def test_integers_past_64_bits_are_a_422_naming_the_range(
    agent_client: Client, url: str
):
    body = assert_error(agent_client.get(url), 422, "validation_error")
    assert "9223372036854775807" in body["detail"]


@pytest.mark.parametrize("label", [" ", "", "two words", "<x>", "a/b", "🦜", "x" * 101])
def test_block_labels_keep_to_a_slug_pattern(agent_client: Client, label: str):
    response = raw_post(agent_client, "/api/blocks", json.dumps({"label": label}))
    assert response.status_code == 422, response.content
    assert not MemoryBlock.objects.exists()
    if len(label) <= 100:
        assert "letters, digits, '_', '-' and '.'" in response.json()["detail"]


def test_the_label_pattern_is_in_the_openapi(openapi: dict[str, Any]):
    label = openapi["components"]["schemas"]["BlockCreateIn"]["properties"]["label"]
    assert label["pattern"] == LABEL_PATTERN == r"^(?!\.+$)[\w.-]{1,100}$"


def test_the_block_service_refuses_a_label_that_would_break_its_tag(agent):
    from pattern_site.kernel.errors import InvalidInput

    with pytest.raises(InvalidInput, match="letters, digits"):
        block_create(actor=Actor.system(), owner=agent, label='a">b')
    assert not MemoryBlock.objects.exists()


LATEST = "9999-12-31T23:59:59-14:00"
EARLIEST = "0001-01-01T00:00:00+14:00"


@pytest.mark.parametrize(
    "url,body",
    [
        ("/api/tools/search", {"query": "x", "filters": {"since": LATEST}}),
        ("/api/tools/search", {"query": "x", "filters": {"until": EARLIEST}}),
        ("/api/tools/archival_memory_search", {"query": "x", "end_datetime": LATEST}),
    ],
)
def test_datetimes_at_the_calendars_edges_are_a_422(
    agent_client: Client, url: str, body: dict[str, Any]
):
    response = raw_post(agent_client, url, json.dumps(body))
    error = assert_error(response, 422, "validation_error")
    assert "9999-12-30" in error["detail"]


# --- the OpenAPI document ---------------------------------------------------

TAGS = {
    "blocks",
    "tools",
    "archival",
    "conversations",
    "search",
    "approvals",
    "agents",
    "context",
    "health",
    "tasks",
    "groups",
    "activity",
    "folders",
}
# The routers whose request fields carry examples and whose operations list
# every error status: every router but health, which these checks and
# Schemathesis (test_schemathesis.py) cover.
DOCUMENTED = {
    "blocks",
    "tools",
    "archival",
    "conversations",
    "search",
    "approvals",
    "agents",
    "context",
    "tasks",
    "activity",
    "groups",
    "folders",
}


def _documented(op: dict[str, Any]) -> bool:
    return op["tags"][0] in DOCUMENTED


@pytest.fixture
def openapi(db: None) -> dict[str, Any]:
    return Client().get("/api/openapi.json").json()


def _operations(openapi: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, op)
        for path, ops in openapi["paths"].items()
        for method, op in ops.items()
    ]


def _schema(openapi: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in ref:
        return openapi["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]
    if "allOf" in ref:
        return _schema(openapi, ref["allOf"][0])
    return ref


def test_every_operation_has_one_product_tag(openapi: dict[str, Any]):
    assert {t["name"] for t in openapi["tags"]} == TAGS
    for method, path, op in _operations(openapi):
        assert len(op["tags"]) == 1 and op["tags"][0] in TAGS, (method, path)


def test_summaries_and_descriptions_speak_of_the_product(openapi: dict[str, Any]):
    text = json.dumps(
        [
            (op.get("summary"), op.get("description"))
            for _, _, op in _operations(openapi)
        ]
    )
    for word in ("v1", "seed", "001"):
        assert word not in text


def test_every_request_body_field_has_a_realistic_example(openapi: dict[str, Any]):
    def check(schema: dict[str, Any], where: str) -> None:
        schema = _schema(openapi, schema)
        for name, prop in schema.get("properties", {}).items():
            target = _schema(openapi, prop)
            if "properties" in target:
                check(target, f"{where}.{name}")
                continue
            items = prop.get("items", {})
            if "$ref" in items:
                check(items, f"{where}.{name}[]")
                continue
            if "discriminator" in items:
                for variant in items["oneOf"]:
                    check(variant, f"{where}.{name}[]")
                continue
            assert "examples" in prop or "const" in prop, f"{where}.{name}"
            assert prop.get("examples") != ["string"], f"{where}.{name}"

    for method, path, op in _operations(openapi):
        if not _documented(op):
            continue
        body = op.get("requestBody", {}).get("content", {}).get("application/json")
        if body is None:
            continue
        if "example" in body:
            continue
        check(body["schema"], f"{method} {path}")


def test_every_operation_lists_its_error_statuses_with_one_error_schema(
    openapi: dict[str, Any],
):
    for method, path, op in _operations(openapi):
        if path == "/api/health" or not _documented(op):
            continue
        for status in ("401", "422"):
            content = op["responses"][status]["content"]["application/json"]
            assert content["schema"] == {"$ref": "#/components/schemas/ErrorOut"}
        if "requestBody" in op:
            assert {"400", "413"} <= set(op["responses"]), (method, path)
        if "{" in path:
            assert "404" in op["responses"], (method, path)


# --- found by Schemathesis (test_schemathesis.py) ---------------------------


@pytest.mark.parametrize(
    "url,body",
    [
        ("/api/blocks", {"label": "notes", "pinned": 0}),
        ("/api/archival", {"content": "Ana visits", "importance": False}),
        ("/api/tools/recall", {"action": "insert", "content": "x", "importance": True}),
        ("/api/context/build", {"include_descriptions": 0}),
        ("/api/tools/archival_memory_search", {"query": "Ana", "end_datetime": 0}),
        ("/api/tools/search", {"query": "Ana", "filters": [None, None]}),
        ("/api/tools/search", {"query": "Ana", "limit": "5"}),
    ],
)
def test_json_values_of_the_wrong_type_are_not_coerced(
    agent_client: Client, url: str, body: dict[str, Any]
):
    response = raw_post(agent_client, url, json.dumps(body))
    assert_error(response, 422, "validation_error")
    assert not MemoryBlock.objects.exists()
    assert not ArchivalEntry.objects.exists()


def test_a_final_conversation_status_is_a_documented_409(
    agent_client: Client, agent, openapi: dict[str, Any]
):
    conversation = conversation_start(agent=agent)
    url = f"/api/conversations/{conversation.pk}/status"
    archived = raw_post(agent_client, url, json.dumps({"status": "archived"}))
    assert archived.status_code == 200, archived.content
    again = raw_post(agent_client, url, json.dumps({"status": "idle"}))
    assert_error(again, 409, "conflict")
    path = "/api/conversations/{conversation_id}/status"
    assert "409" in openapi["paths"][path]["post"]["responses"]


def test_an_html_error_under_api_becomes_the_json_shape(rf: Any):
    from django.http import HttpResponse

    from pattern_site.middleware import ApiJsonErrorMiddleware

    def crash(request: Any) -> HttpResponse:
        return HttpResponse("<h1>Server Error</h1>", status=500)

    api_answer = ApiJsonErrorMiddleware(crash)(rf.get("/api/blocks"))
    assert api_answer["Content-Type"] == "application/json"
    assert json.loads(api_answer.content)["code"] == "server_error"
    page = ApiJsonErrorMiddleware(crash)(rf.get("/memory/search/"))
    assert page.content == b"<h1>Server Error</h1>"


@pytest.mark.parametrize(
    "url", ["/api/approvals?status=maybe", "/api/conversations?status=gone"]
)
def test_status_filters_take_only_their_statuses(
    agent_client: Client, openapi: dict[str, Any], url: str
):
    body = assert_error(agent_client.get(url), 422, "validation_error")
    assert body["errors"][0]["loc"] == ["query", "status"]
    path = url.split("?")[0]
    (status,) = [
        p for p in openapi["paths"][path]["get"]["parameters"] if p["name"] == "status"
    ]
    assert "enum" in json.dumps(status["schema"])


# --- closed and bounded request schemas -------------------------------------


def test_a_misspelt_search_field_is_422_not_an_archival_search(agent_client: Client):
    response = agent_client.post(
        "/api/tools/search",
        {"query": "dentist", "domian": "blocks"},
        content_type=J,
    )
    body = assert_error(response, 422, "validation_error")
    assert body["errors"][0]["loc"] == ["body", "domian"]
    assert body["errors"][0]["type"] == "extra_forbidden"
    assert "unknown field 'domian'" in body["detail"]
    assert "query, queries, domain, mode" in body["detail"]


def test_an_unknown_field_inside_a_nested_schema_names_that_schemas_fields(
    agent_client: Client,
):
    response = agent_client.post(
        "/api/tools/search",
        {"query": "dentist", "filters": {"tag": ["family"]}},
        content_type=J,
    )
    body = assert_error(response, 422, "validation_error")
    assert body["errors"][0]["loc"] == ["body", "filters", "tag"]
    assert "unknown field 'tag'" in body["detail"]
    assert "agent_id, tags, metadata_keys" in body["detail"]


def test_tags_past_the_limit_are_refused_before_the_write(agent_client: Client):
    tags = [f"tag{n}" for n in range(21)]
    response = agent_client.post(
        "/api/archival", {"content": "fact", "tags": tags}, content_type=J
    )
    body = assert_error(response, 422, "validation_error")
    assert body["errors"][0]["loc"] == ["body", "tags"]
    assert ArchivalEntry.objects.count() == 0


def _schema_parts(doc: dict[str, Any], schema: dict[str, Any], where: str) -> Any:
    """Every (where, schema) reachable from ``schema``, each named schema once."""
    seen: set[str] = set()
    todo = [(where, schema)]
    while todo:
        where, part = todo.pop()
        if "$ref" in part:
            name = part["$ref"].rsplit("/", 1)[-1]
            if name not in seen:
                seen.add(name)
                todo.append((name, doc["components"]["schemas"][name]))
            continue
        yield where, part
        for key in ("anyOf", "oneOf", "allOf"):
            todo += [(where, sub) for sub in part.get(key, [])]
        if "items" in part:
            todo.append((f"{where}[]", part["items"]))
        for name, sub in part.get("properties", {}).items():
            todo.append((f"{where}.{name}", sub))


def _request_schemas(doc: dict[str, Any]) -> Any:
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody", {}).get("content", {})
            if "application/json" in body:
                yield f"{method} {path}", body["application/json"]["schema"]
            for param in operation.get("parameters", []):
                yield f"{method} {path} {param['name']}", param["schema"]


def test_every_request_string_and_list_declares_a_maximum(agent_client: Client):
    doc = agent_client.get("/api/openapi.json").json()
    unbounded = [
        where
        for name, schema in _request_schemas(doc)
        for where, part in _schema_parts(doc, schema, name)
        if (
            (part.get("type") == "string" and "maxLength" not in part)
            and not ({"enum", "const", "format"} & part.keys())
        )
        or (part.get("type") == "array" and "maxItems" not in part)
    ]
    assert unbounded == []


def test_every_request_object_refuses_unknown_fields(agent_client: Client):
    doc = agent_client.get("/api/openapi.json").json()
    open_objects = [
        where
        for name, schema in _request_schemas(doc)
        for where, part in _schema_parts(doc, schema, name)
        if "properties" in part and part.get("additionalProperties") is not False
    ]
    assert open_objects == []


def test_no_two_request_or_answer_schemas_share_a_name():
    """The OpenAPI document names each schema by its class name, and a second
    class of the same name silently replaces the first there."""
    from collections import Counter

    from ninja import Schema

    import pattern_site.api  # noqa: F401  (every router, so every schema)

    def every(cls: type) -> list[type]:
        return [cls, *(s for sub in cls.__subclasses__() for s in every(sub))]

    ours = {
        c
        for c in every(Schema)
        if c.__module__.split(".")[0]
        in ("memory", "coordination", "activity", "folders", "pattern_site")
        and "[" not in c.__name__
    }
    twice = [n for n, k in Counter(c.__name__ for c in ours).items() if k > 1]
    assert twice == []
