"""Anthropic's models on the clouds: Vertex AI (``…/publishers/anthropic/models/M:streamRawPredict``)
and Amazon Bedrock (``/model/ID/invoke-with-response-stream``, ``/converse-stream``): which API a
path is, the model and stream flag its URL carries, and the dialect each speaks. docs/record.md."""

from __future__ import annotations

import re
from urllib.parse import unquote

from firsttoken.addon.apis.base import path_only

VERTEX = "anthropic.vertex"  # the Messages dialect, model in the URL, SSE
BEDROCK = "anthropic.bedrock"  # the Messages dialect wrapped in AWS's event stream
CONVERSE = "bedrock.converse"  # Bedrock's own Converse dialect (any model), event stream

#: what each cloud API's events and bodies are written in (an API not named here is its own dialect)
DIALECT = {VERTEX: "anthropic.messages", BEDROCK: "anthropic.messages"}
#: gen_ai.provider.name (OpenTelemetry GenAI semantic conventions) of the platform each API runs on
PLATFORM = {VERTEX: "gcp.vertex_ai", BEDROCK: "aws.bedrock", CONVERSE: "aws.bedrock"}

_VERTEX = re.compile(r"/publishers/anthropic/models/([^/:]+):(streamrawpredict|rawpredict)$", re.IGNORECASE)
_BEDROCK = re.compile(r"/model/([^/]+)/(invoke-with-response-stream|invoke|converse-stream|converse)$", re.IGNORECASE)
#: Bedrock model ids of other vendors (their invoke bodies are not Anthropic's Messages)
_NOT_ANTHROPIC = ("amazon.", "meta.", "mistral.", "cohere.", "ai21.", "deepseek.", "openai.", "qwen.", "writer.",
                  "stability.", "twelvelabs.", "luma.")


def cloud_api(path: str) -> str | None:
    """The cloud API of a POST to ``path`` (query ignored), or None when it is none of them.
    Vertex's ``count-tokens:rawPredict`` is no model turn: None (then "other")."""
    p = path_only(path).rstrip("/")
    m = _VERTEX.search(p)
    if m:
        return None if m.group(1).lower() == "count-tokens" else VERTEX
    m = _BEDROCK.search(p)
    if m:
        if m.group(2).lower().startswith("converse"):
            return CONVERSE
        model = unquote(m.group(1)).lower().rsplit("/", 1)[-1]  # an ARN's last part: the profile or model
        for region in ("us.", "eu.", "apac.", "global.", "jp.", "au.", "us-gov.", "ca."):
            if model.startswith(region):
                model = model[len(region):]
                break
        return None if model.startswith(_NOT_ANTHROPIC) else BEDROCK
    return None


def url_facts(api: str | None, path: str | None) -> dict:
    """``model`` and ``stream`` as a cloud API's URL says them (its body names neither, or not both)."""
    if api not in PLATFORM or not path:
        return {}
    p = path_only(path).rstrip("/")
    m = _VERTEX.search(p) or _BEDROCK.search(p)
    if not m:
        return {}
    model = unquote(m.group(1))
    how = m.group(2).lower()
    return {"model": model[:200], "stream": how in ("streamrawpredict", "invoke-with-response-stream", "converse-stream")}


def dialect_of(api: str | None) -> str:
    """The dialect an API's bodies are written in (``anthropic.vertex`` -> ``anthropic.messages``)."""
    return DIALECT.get(api or "other", api or "other")


def platform_of(api: str | None) -> str | None:
    """The platform's gen_ai.provider.name for a cloud API, else None."""
    return PLATFORM.get(api or "")
