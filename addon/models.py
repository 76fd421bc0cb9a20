"""What firsttoken knows about models by id: how many tokens their context window holds.

A prompt is "large" relative to its model's window, not to a fixed number (21k tokens of Claude
Code's system prompt and tools is a normal request to a 200k-token model). Looked up by id
prefix, longest first; an unknown model has no window (None) and callers use a fixed floor.
"""

from __future__ import annotations

#: id prefix -> context window in tokens: the providers' documented input windows
WINDOWS: dict[str, int] = {
    "gpt-3.5-turbo": 16_385,
    "gpt-4-turbo": 128_000,
    "gpt-4-32k": 32_768,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-4": 8_192,
    "gpt-5": 400_000,
    "gpt-oss": 131_072,
    "o1-mini": 128_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "codex-mini": 200_000,
    "claude-3-5-haiku": 200_000,
    "claude-3": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-opus-4": 200_000,
    "claude-haiku-4": 200_000,
    "claude": 200_000,
    "deepseek-chat": 128_000,
    "deepseek-reasoner": 128_000,
    "deepseek": 64_000,
    "gemini-1.5": 1_048_576,
    "gemini-2": 1_048_576,
    "gemini": 1_048_576,
    "glm-4": 128_000,
    "qwen-max": 32_768,
    "qwen-plus": 131_072,
    "qwen-turbo": 1_000_000,
    "qwen3": 131_072,
    "qwen2.5": 131_072,
    "mistral-large": 131_072,
    "mistral-small": 131_072,
    "codestral": 256_000,
    "llama-3.1": 131_072,
    "llama-3.2": 131_072,
    "llama-3.3": 131_072,
    "llama3": 8_192,
    "grok-4": 256_000,
    "grok-3": 131_072,
    "kimi-k2": 131_072,
    "moonshot-v1-128k": 128_000,
    "moonshot-v1-32k": 32_768,
    "moonshot-v1-8k": 8_192,
    "sonar": 127_072,
}
_PREFIXES = sorted(WINDOWS, key=len, reverse=True)


def context_window(model: str | None) -> int | None:
    """The model's context window in tokens, or None when it is not known."""
    if not isinstance(model, str) or not model.strip():
        return None
    # tokens.encoding_for_model's normalisation (provider prefix, @version and :tag removed), without
    # importing tiktoken: the diagnosis imports this module
    m = model.strip().lower().rsplit("/", 1)[-1].split("@", 1)[0]
    if not m.startswith("ft:"):
        m = m.split(":", 1)[0]
    else:
        m = m.split(":", 2)[1] if m.count(":") >= 2 else m
    for prefix in _PREFIXES:
        if m.startswith(prefix):
            return WINDOWS[prefix]
    return None
