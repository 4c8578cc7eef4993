"""One small interface to an LLM: an OpenAI-compatible Chat Completions call.

``chat_client()`` returns ``None`` unless ``LLM_BASE_URL`` and ``LLM_MODEL``
are set; then summaries are written by the model, otherwise by the
extractive summarizer.  ``chat_client(model=...)`` is the same provider
asked for another model (an agent's own).  Every call is charged to its
constellation's daily token budget (``LLM_DAILY_TOKEN_BUDGET``, refused
before the call when the day's spend plus this call's estimate would exceed
it).  The SDK retries connection errors, 408/409/429 and 5xx with
exponential backoff (``LLM_MAX_RETRIES``); each attempt is bounded by
``LLM_TIMEOUT`` seconds (for a streamed answer: each wait for the next
piece).  Prompts are the template files under ``prompts/``.
"""

import functools
import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

import httpx2
import openai
from django.conf import settings

from activity.llm.services import llm_budget_check, llm_usage_add
from pattern_site.kernel.errors import ApplicationError

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


def message_tokens(message: dict[str, Any]) -> int:
    """The estimate of one chat message: its text and any tool calls."""
    tokens = estimate_tokens(message.get("content") or "")
    if message.get("tool_calls"):
        tokens += estimate_tokens(json.dumps(message["tool_calls"]))
    return tokens


@dataclass(frozen=True)
class Completion:
    text: str
    tokens: int
    model: str


@dataclass(frozen=True)
class RequestedCall:
    """A tool call the model asked for; ``arguments`` as the JSON text it
    wrote (it may not be valid JSON)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class StepCompletion:
    text: str
    tool_calls: list[RequestedCall]
    tokens: int
    model: str


@functools.lru_cache(maxsize=16)
def _sdk_client(
    base_url: str, api_key: str, timeout: float, max_retries: int
) -> openai.OpenAI:
    """One SDK client per provider and settings, kept: making one (its
    HTTP connection pool, its TLS context) costs a turn more than a step,
    and reusing it keeps the connection to the provider open."""
    return openai.OpenAI(
        base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries
    )


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
        self._client = _sdk_client(base_url, api_key or "none", timeout, max_retries)

    def _budget_check(
        self,
        constellation_id: int,
        messages: list[dict[str, Any]],
        prompt_tokens: int | None = None,
    ) -> int:
        """The prompt's token estimate (``prompt_tokens`` when the caller
        counted them); a call the day's budget cannot pay for is refused
        before it is made."""
        estimate = (
            prompt_tokens
            if prompt_tokens is not None
            else sum(message_tokens(m) for m in messages)
        )
        llm_budget_check(
            constellation_id=constellation_id, tokens=estimate + self.max_tokens
        )
        return estimate

    def _request(
        self, *, constellation_id: int, messages: list[dict[str, Any]], **extra: Any
    ) -> tuple[int, Any]:
        """The prompt's token estimate and the SDK's answer to the call."""
        estimate = self._budget_check(constellation_id, messages)
        # The messages are plain JSON already: sent as the body's own
        # field, they skip the SDK's walk of each as a typed dict.
        try:
            response = self._client.chat.completions.create(
                model=self.model,
                messages=[],
                max_tokens=self.max_tokens,
                temperature=0.2,
                extra_body={"messages": messages},
                **extra,
            )
        except openai.APIError as exc:
            raise _unavailable(exc) from exc
        return estimate, response

    def complete(
        self,
        *,
        constellation_id: int,
        messages: list[dict[str, str]],
        json_output: bool = False,
    ) -> Completion:
        extra: dict[str, Any] = {}
        if json_output:
            extra["response_format"] = {"type": "json_object"}
        estimate, response = self._request(
            constellation_id=constellation_id, messages=messages, **extra
        )
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content or "").strip() if choice else ""
        usage = response.usage
        tokens = usage.total_tokens if usage is not None else estimate
        llm_usage_add(constellation_id=constellation_id, tokens=tokens)
        if not text:
            raise LLMUnavailable("the LLM returned an empty answer")
        return Completion(text=text, tokens=tokens, model=response.model or self.model)

    def complete_step(
        self,
        *,
        constellation_id: int,
        messages: list[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | bytes = (),
        on_text: Callable[[str], None],
        prompt_tokens: int | None = None,
    ) -> StepCompletion:
        """One answer streamed: ``on_text`` is called with each piece of
        text as it arrives (an exception it raises stops the stream and
        propagates), and the tool calls it asks for (several at once when
        it calls tools in parallel) are assembled from their pieces.
        Tokens are charged however the stream ends, from the usage the
        server reports or else estimated from what was received.

        ``tools``: the functions, or their JSON array already encoded
        (``json_encode``), which a caller sending the same tools with
        every request encodes once.  ``prompt_tokens``: the messages' count
        when the caller has it (a turn's composer counts them as it fits
        them to the model), instead of an estimate made here."""
        estimate = self._budget_check(constellation_id, messages, prompt_tokens)
        head: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": 0.2,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        # The body encoded here, as the SDK encodes one (sent as its JSON
        # content, the same on each retry): the tools, tens of kilobytes
        # and the same every step of a turn, are not encoded again.
        body = json_encode(head)[:-1] + b',"messages":' + json_encode(messages)
        if tools:
            encoded = tools if isinstance(tools, bytes) else json_encode(list(tools))
            body += b',"tools":' + encoded
        body += b"}"
        pieces: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        tokens: int | None = None
        model, finished = self.model, False
        try:
            # Posted through the SDK (its retries, timeouts, errors and
            # key), the stream read as JSON: the SDK's typed chunk per
            # piece costs more than the rest of the call.
            response = self._client.post(
                "/chat/completions",
                content=body,
                cast_to=httpx2.Response,
                stream=True,
            )
        except openai.APIError as exc:
            raise _unavailable(exc) from exc
        try:
            for chunk in _stream_chunks(response):
                model = chunk.get("model") or model
                if chunk.get("usage"):
                    tokens = chunk["usage"].get("total_tokens", tokens)
                for choice in chunk.get("choices") or ():
                    finished = finished or choice.get("finish_reason") is not None
                    delta = choice.get("delta") or {}
                    for piece in delta.get("tool_calls") or ():
                        call = calls.setdefault(
                            piece.get("index", 0),
                            {"id": "", "name": "", "arguments": ""},
                        )
                        call["id"] = piece.get("id") or call["id"]
                        function = piece.get("function") or {}
                        call["name"] += function.get("name") or ""
                        call["arguments"] += function.get("arguments") or ""
                    if delta.get("content"):
                        pieces.append(delta["content"])
                        on_text(delta["content"])
        except httpx2.HTTPError as exc:
            raise _unavailable(exc) from exc
        finally:
            response.close()
            if tokens is None:
                tokens = estimate + estimate_tokens("".join(pieces))
            llm_usage_add(constellation_id=constellation_id, tokens=tokens)
        if not finished:
            raise LLMUnavailable("the LLM's answer stopped before it was finished")
        return StepCompletion(
            text="".join(pieces).strip(),
            tool_calls=[RequestedCall(**calls[i]) for i in sorted(calls)],
            tokens=tokens,
            model=model,
        )

    def complete_streamed(
        self,
        *,
        constellation_id: int,
        messages: list[dict[str, str]],
        on_text: Callable[[str], None],
    ) -> Completion:
        """The answer streamed, as ``complete_step`` streams it, without
        tools."""
        step = self.complete_step(
            constellation_id=constellation_id, messages=messages, on_text=on_text
        )
        if not step.text:
            raise LLMUnavailable("the LLM returned an empty answer")
        return Completion(text=step.text, tokens=step.tokens, model=step.model)

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


def json_encode(value: Any) -> bytes:
    """``value`` as a request body's JSON, encoded as the SDK encodes one
    (UTF-8, compact, no NaN)."""
    return json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    ).encode()


def _stream_chunks(response: httpx2.Response) -> Iterator[dict[str, Any]]:
    """The JSON chunks of a streamed answer (Server-Sent Events, each
    ``data`` a chunk, ``[DONE]`` the end); an error event is
    ``LLMUnavailable``.  The body is read to its end, past ``[DONE]``, so
    that the connection goes back to the pool for the next call."""
    data: list[str] = []
    done = False
    for line in response.iter_lines():
        if line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
            continue
        if line or not data or done:
            continue  # another field, a comment, or an empty event
        text, data = "\n".join(data), []
        if text.startswith("[DONE]"):
            done = True
            continue
        try:
            chunk = json.loads(text)
        except ValueError as exc:
            raise LLMUnavailable(f"the LLM's stream was not JSON: {exc}") from exc
        if not isinstance(chunk, dict):
            raise LLMUnavailable("the LLM's stream was not JSON objects")
        if chunk.get("error"):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else None
            raise LLMUnavailable(
                f"the LLM call failed: {message or 'an error occurred while streaming'}"
            )
        yield chunk


def _unavailable(exc: Exception) -> LLMUnavailable:
    if isinstance(
        exc,
        openai.APITimeoutError | httpx2.TimeoutException,
    ):
        return LLMUnavailable(f"the LLM did not answer in time: {exc}")
    return LLMUnavailable(f"the LLM call failed: {exc}")


def _strip_fences(text: str) -> str:
    """Models often wrap JSON in a Markdown fence despite being asked not to."""
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text


def llm_provider_configured() -> bool:
    return bool(settings.LLM_BASE_URL)


def chat_client(*, model: str = "", provider: str = "") -> ChatClient | None:
    """The provider's client for ``model`` (default ``LLM_MODEL``); None
    when no provider or no model is configured.  ``provider`` names one of
    ``LLM_PROVIDERS`` (``{"name": {"base_url", "api_key"}}``), blank the
    default one; an unknown name is ``LLMUnavailable``."""
    model = model or settings.LLM_MODEL
    base_url, api_key = settings.LLM_BASE_URL, settings.LLM_API_KEY
    if provider:
        entry = settings.LLM_PROVIDERS.get(provider)
        if not isinstance(entry, dict) or not entry.get("base_url"):
            raise LLMUnavailable(
                f"no LLM provider {provider!r} is configured (PATTERN_LLM_PROVIDERS"
                f" has: {', '.join(sorted(settings.LLM_PROVIDERS)) or 'none'})"
            )
        base_url, api_key = entry["base_url"], entry.get("api_key", "")
    if not (base_url and model):
        return None
    return ChatClient(
        base_url=base_url,
        api_key=api_key,
        model=model,
        timeout=settings.LLM_TIMEOUT,
        max_retries=settings.LLM_MAX_RETRIES,
        max_tokens=settings.LLM_MAX_TOKENS,
    )
