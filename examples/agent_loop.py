"""A minimal agent loop over the Pattern site tool API.

It fetches the agent's tools as OpenAI function-calling JSON
(``GET /api/tools/schemas``) and its system prompt (``POST
/api/context/build``), then talks to any OpenAI-compatible chat endpoint:
each tool call the model makes is sent to ``POST /api/tools/<name>`` with
the agent's token, and the answer goes back to the model, until it answers
in plain text.

    python examples/agent_loop.py --server http://127.0.0.1:8000 \\
        --token "$PATTERN_AGENT_TOKEN" --model gpt-4o-mini \\
        "Remember that Sam prefers check-ins before 10am."

The model endpoint comes from ``--model-url`` (or ``OPENAI_BASE_URL``) and
its key from ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import httpx
from openai import OpenAI


class ToolApi:
    """The Pattern site tool API, called with an agent's bearer token."""

    def __init__(self, server: str, token: str) -> None:
        self.http = httpx.Client(
            base_url=server.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )

    def tools(self) -> list[dict[str, Any]]:
        response = self.http.get("/api/tools/schemas")
        response.raise_for_status()
        return response.json()["openai"]

    def system_prompt(self) -> str:
        response = self.http.post("/api/context/build")
        response.raise_for_status()
        return response.json()["system_prompt"]

    def call(self, name: str, arguments: str) -> str:
        """Run one tool call; errors go back to the model as they came,
        since they say what was wrong and what is allowed."""
        try:
            body = json.loads(arguments or "{}")
        except ValueError as exc:
            return json.dumps({"detail": f"arguments are not JSON: {exc}"})
        response = self.http.post(f"/api/tools/{name}", json=body)
        return response.text


def run(
    *, api: ToolApi, model: OpenAI, model_name: str, prompt: str, max_turns: int
) -> str:
    tools = api.tools()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": api.system_prompt()},
        {"role": "user", "content": prompt},
    ]
    for _ in range(max_turns):
        reply = model.chat.completions.create(
            model=model_name, messages=messages, tools=tools
        )
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = api.call(call.function.name, call.function.arguments)
            print(f"tool {call.function.name}: {result}", file=sys.stderr)
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": result}
            )
    return "(stopped: too many tool calls)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("prompt")
    parser.add_argument("--server", default=os.environ.get("PATTERN_URL"))
    parser.add_argument("--token", default=os.environ.get("PATTERN_AGENT_TOKEN"))
    parser.add_argument("--model", default=os.environ.get("MODEL", "gpt-4o-mini"))
    parser.add_argument("--model-url", default=os.environ.get("OPENAI_BASE_URL"))
    parser.add_argument("--max-turns", type=int, default=8)
    args = parser.parse_args(argv)
    if not args.server or not args.token:
        parser.error("give --server and --token (or PATTERN_URL, PATTERN_AGENT_TOKEN)")
    model = OpenAI(
        base_url=args.model_url, api_key=os.environ.get("OPENAI_API_KEY", "none")
    )
    answer = run(
        api=ToolApi(args.server, args.token),
        model=model,
        model_name=args.model,
        prompt=args.prompt,
        max_turns=args.max_turns,
    )
    print(answer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
