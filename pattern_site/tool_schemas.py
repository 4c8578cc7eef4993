"""The agent tools as function-calling JSON, generated from the tool
registry (``pattern_site.kernel.tools``), whose argument schemas are the
request bodies of the tools' HTTP routes: no schema is copied by hand.

A model's call of ``name`` with arguments ``args`` is answered by the
tool's endpoint (``POST /api/tools/<name>`` for most) with ``args`` as the
JSON body, or in process by ``pattern_site.kernel.tools.tool_call``.
"""

from typing import Any

from pattern_site.kernel.tools import tool_functions, tools_all


def tool_schemas(*, path_prefix: str) -> dict[str, Any]:
    """The agent tools in OpenAI's and Anthropic's function-calling formats,
    and the endpoint of each (its path under ``path_prefix``)."""
    openai = tool_functions()
    return {
        "openai": openai,
        "anthropic": [
            {
                "name": f["function"]["name"],
                "description": f["function"]["description"],
                "input_schema": f["function"]["parameters"],
            }
            for f in openai
        ],
        "endpoints": {
            tool.name: f"POST {path_prefix}{tool.route}" for tool in tools_all()
        },
    }
