"""One small interface to an LLM: an OpenAI-compatible Chat Completions call.

``chat_client()`` returns ``None`` unless ``LLM_BASE_URL`` and ``LLM_MODEL``
are set; then summaries are written by the model, otherwise by the
extractive summarizer.  Every call is charged to its constellation's daily
token budget (``LLM_DAILY_TOKEN_BUDGET``, refused before the call when the
day's spend plus this call's estimate would exceed it).  The SDK retries
connection errors, 408/409/429 and 5xx with exponential backoff
(``LLM_MAX_RETRIES``); each attempt is bounded by ``LLM_TIMEOUT`` seconds.
Prompts are the template files under ``prompts/``.
"""

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

import openai
from django.conf import settings

from activity.llm.services import llm_budget_check, llm_usage_add
from coordination.errors import ApplicationError

PROMPTS = Path(__file__).resolve().parent / "prompts"


class LLMUnavailable(ApplicationError):
    status_code = 503
    code = "llm_unavailable"


def prompt_render(name: str, **values: str) -> str:
    """The prompt template ``prompts/<name>.txt`` with ``$values`` filled."""
    template = Template((PROMPTS / f"{name}.txt").read_text(encoding="utf-8"))
    return template.substitute(values)


def estimate_tokens(text: str) -> int:
    """A conservative guess for the budget check (about 4 characters a token)."""
    return math.ceil(len(text) / 4)


@dataclass(frozen=True)
class Completion:
    text: str
    tokens: int
    model: str


class ChatClient:
    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        timeout: float,
        max_retries: int,
        max_tokens: int,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or "none",
            timeout=timeout,
            max_retries=max_retries,
        )

    def complete(
        self,
        *,
        constellation_id: int,
        messages: list[dict[str, str]],
        json_output: bool = False,
    ) -> Completion:
        estimate = sum(estimate_tokens(m["content"]) for m in messages)
        llm_budget_check(
            constellation_id=constellation_id, tokens=estimate + self.max_tokens
        )
        extra: dict[str, Any] = {}
        if json_output:
            extra["response_format"] = {"type": "json_object"}
        try:
            response = self._client.chat.completions.create(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                max_tokens=self.max_tokens,
                temperature=0.2,
                **extra,
            )
        except openai.APITimeoutError as exc:
            raise LLMUnavailable(f"the LLM did not answer in time: {exc}") from exc
        except openai.APIError as exc:
            raise LLMUnavailable(f"the LLM call failed: {exc}") from exc
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content or "").strip() if choice else ""
        usage = response.usage
        tokens = usage.total_tokens if usage is not None else estimate
        llm_usage_add(constellation_id=constellation_id, tokens=tokens)
        if not text:
            raise LLMUnavailable("the LLM returned an empty answer")
        return Completion(text=text, tokens=tokens, model=response.model or self.model)

    def complete_json(
        self,
        *,
        constellation_id: int,
        messages: list[dict[str, str]],
        validate: Callable[[Any], Any],
    ) -> tuple[Any, Completion]:
        """A JSON answer passed through ``validate`` (which raises
        ``ValueError`` on a wrong shape); a bad answer is asked again,
        ``LLM_JSON_RETRIES`` times, with the error shown to the model."""
        conversation = list(messages)
        tokens = 0
        for attempt in range(settings.LLM_JSON_RETRIES + 1):
            completion = self.complete(
                constellation_id=constellation_id,
                messages=conversation,
                json_output=True,
            )
            tokens += completion.tokens
            try:
                value = validate(json.loads(_strip_fences(completion.text)))
            except ValueError as exc:
                if attempt == settings.LLM_JSON_RETRIES:
                    raise LLMUnavailable(
                        f"the LLM's answer was not the JSON asked for: {exc}"
                    ) from exc
                conversation += [
                    {"role": "assistant", "content": completion.text},
                    {
                        "role": "user",
                        "content": prompt_render("json_retry", error=str(exc)),
                    },
                ]
                continue
            return value, Completion(
                text=completion.text, tokens=tokens, model=completion.model
            )
        raise AssertionError("unreachable")


def _strip_fences(text: str) -> str:
    """Models often wrap JSON in a Markdown fence despite being asked not to."""
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text


def chat_client() -> ChatClient | None:
    if not (settings.LLM_BASE_URL and settings.LLM_MODEL):
        return None
    return ChatClient(
        base_url=settings.LLM_BASE_URL,
        api_key=settings.LLM_API_KEY,
        model=settings.LLM_MODEL,
        timeout=settings.LLM_TIMEOUT,
        max_retries=settings.LLM_MAX_RETRIES,
        max_tokens=settings.LLM_MAX_TOKENS,
    )
