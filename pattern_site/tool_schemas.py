"""The agent tools as function-calling JSON, generated from the OpenAPI
document (itself generated from the ninja schemas), so no schema is copied
by hand.

A tool is every ``POST /api/tools/<name>`` operation; its parameters are the
request body's JSON Schema with every ``$ref`` inlined (function-calling
APIs take one self-contained schema per tool).  A model's call of ``name``
with arguments ``args`` is answered by ``POST /api/tools/<name>`` with
``args`` as the JSON body.
"""

from typing import Any

TOOLS_PREFIX = "/api/tools/"


def _inline(schema: Any, components: dict[str, Any]) -> Any:
    if isinstance(schema, dict):
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[1]
            return _inline(components[name], components)
        return {key: _inline(value, components) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_inline(item, components) for item in schema]
    return schema


def _parameters(operation: dict[str, Any], components: dict[str, Any]) -> Any:
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    schema = _inline(body, components)
    # ninja wraps an optional body in allOf; a tool takes the object itself.
    while set(schema) == {"allOf"} and len(schema["allOf"]) == 1:
        schema = schema["allOf"][0]
    schema = {k: v for k, v in schema.items() if k != "title"}
    if "discriminator" in schema:
        # Discriminator mappings point into components, gone once inlined.
        del schema["discriminator"]
    return schema


def agent_tools(openapi: dict[str, Any]) -> list[dict[str, Any]]:
    """``[{"name", "description", "parameters", "endpoint"}]``, one per tool."""
    components = openapi.get("components", {}).get("schemas", {})
    tools = []
    for path, operations in openapi["paths"].items():
        operation = operations.get("post")
        if not path.startswith(TOOLS_PREFIX) or operation is None:
            continue
        if "requestBody" not in operation:
            continue
        # Function names allow letters, digits, "_" and "-" only.
        name = path.removeprefix(TOOLS_PREFIX).replace("/", "_")
        description = operation.get("description") or operation.get("summary", "")
        tools.append(
            {
                "name": name,
                "description": description.strip(),
                "parameters": _parameters(operation, components),
                "endpoint": f"POST {path}",
            }
        )
    return tools


def tool_schemas(openapi: dict[str, Any]) -> dict[str, Any]:
    """The agent tools in OpenAI's and Anthropic's function-calling formats."""
    tools = agent_tools(openapi)
    return {
        "openai": [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t["description"],
                    "parameters": t["parameters"],
                },
            }
            for t in tools
        ],
        "anthropic": [
            {
                "name": t["name"],
                "description": t["description"],
                "input_schema": t["parameters"],
            }
            for t in tools
        ],
        "endpoints": {t["name"]: t["endpoint"] for t in tools},
    }
