"""Which LLM API a request speaks, and the interpreter for its responses."""

from __future__ import annotations

from firsttoken.addon.apis import gemini, ollama
from firsttoken.addon.apis.anthropic_messages import AnthropicMessages, AnthropicVertex
from firsttoken.addon.apis.base import ApiFacts, Delta, Interpreter, path_only
from firsttoken.addon.apis.bedrock import BedrockConverse, BedrockInvoke
from firsttoken.addon.apis.clouds import cloud_api, dialect_of, platform_of
from firsttoken.addon.apis.clouds import url_facts as cloud_url_facts
from firsttoken.addon.apis.openai_chat import OpenAIChat
from firsttoken.addon.apis.openai_completions import OpenAICompletions
from firsttoken.addon.apis.openai_realtime import OpenAIRealtime
from firsttoken.addon.apis.openai_responses import OpenAIResponses

INTERPRETERS: dict[str, type] = {
    OpenAIChat.api: OpenAIChat,
    OpenAICompletions.api: OpenAICompletions,
    OpenAIResponses.api: OpenAIResponses,
    OpenAIRealtime.api: OpenAIRealtime,
    AnthropicMessages.api: AnthropicMessages,
    gemini.Gemini.api: gemini.Gemini,
    AnthropicVertex.api: AnthropicVertex,
    BedrockInvoke.api: BedrockInvoke,
    BedrockConverse.api: BedrockConverse,
    ollama.OllamaChat.api: ollama.OllamaChat,
    ollama.OllamaGenerate.api: ollama.OllamaGenerate,
}

__all__ = [
    "INTERPRETERS",
    "AnthropicMessages",
    "AnthropicVertex",
    "BedrockConverse",
    "BedrockInvoke",
    "ApiFacts",
    "Delta",
    "Interpreter",
    "OpenAIChat",
    "OpenAICompletions",
    "OpenAIRealtime",
    "OpenAIResponses",
    "cloud_api",
    "detect_api",
    "dialect_of",
    "make_interpreter",
    "platform_of",
    "url_facts",
]


def detect_api(method: str, path: str) -> str:
    """The API of a request, judged by its method and path (query string ignored).

    Only POST is an API call. The path's ending decides, so prefixes (``/v1``, ``/api/v1``,
    ``/openai/deployments/<name>``, a gateway's route) don't matter:
    ``.../chat/completions`` -> openai.chat, ``.../completions`` -> openai.completions,
    ``.../responses`` -> openai.responses, ``.../messages`` -> anthropic.messages (but not
    OpenAI Assistants' ``.../threads/<id>/messages``), ``.../models/<m>:streamGenerateContent`` or
    ``:generateContent`` -> gemini.generate (also on Vertex AI), Ollama's native ``.../api/chat`` ->
    ollama.chat and ``.../api/generate`` -> ollama.generate. Sub-resources such as
    ``/v1/messages/count_tokens``, ``/v1/messages/batches`` or ``/v1/responses/<id>`` are "other".
    Anthropic on Vertex AI and Bedrock (and Bedrock's Converse): ``clouds.cloud_api``.
    """
    if type(method) is not str or type(path) is not str or method.upper() != "POST":
        return "other"
    p = path_only(path)
    if "://" in p:  # absolute-form request target
        rest = p.split("://", 1)[1]
        i = rest.find("/")
        p = rest[i:] if i >= 0 else "/"
    cloud = cloud_api(p)
    if cloud is not None:
        return cloud
    p = "/" + p.strip("/").lower()
    if ":" in p and (found := gemini.detect(method, p)):  # Google's `…/models/{model}:method`
        return found
    if (found := ollama.detect(p)) is not None:
        return found
    if p.endswith("/chat/completions"):
        return "openai.chat"
    if p.endswith("/completions"):
        return "openai.completions"
    if p.endswith("/responses"):
        return "openai.responses"
    if p.endswith("/messages") and "/threads/" not in p:
        return "anthropic.messages"
    return "other"


def url_facts(method: str, api: str | None, path: str | None) -> dict:
    """``model`` and ``stream`` as the URL says them, for the APIs that name them there (Gemini's
    ``models/M:streamGenerateContent``, Anthropic on Vertex and Bedrock); empty for the others."""
    return gemini.path_facts(method, path) or cloud_url_facts(api, path)


def make_interpreter(api: str) -> Interpreter | None:
    """A fresh interpreter for ``api``, or None for "other" / unknown names."""
    cls = INTERPRETERS.get(api)
    return cls() if cls is not None else None
