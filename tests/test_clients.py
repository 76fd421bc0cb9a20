"""Real clients through the real proxy: the official SDKs (sync and async), curl."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess

import anthropic
import openai
import pytest
from conftest import FAST, rows


def _errors(row) -> list[str]:
    return [f["code"] for f in json.loads(row["findings"] or "[]") if f["severity"] == "error"]


def test_async_openai_concurrent_streams(proxy, db_path):
    async def main():
        async with openai.AsyncOpenAI(base_url=proxy.url + "/v1", api_key="sk-test-async-00000000000000000", max_retries=0) as c:
            async def one(i):
                s = await c.chat.completions.create(model="gpt-4o-mini", stream=True, stream_options={"include_usage": True},
                                                    messages=[{"role": "user", "content": f"request {i}"}])
                return "".join([ch.choices[0].delta.content or "" async for ch in s if ch.choices])
            return await asyncio.gather(*[one(i) for i in range(10)])

    texts = asyncio.run(main())
    assert all(texts)
    proxy.flush()
    rs = rows(db_path)
    assert len(rs) == 10
    for r in rs:
        assert r["events"] == FAST["output_tokens"] and r["usage_completion_tokens"] == FAST["output_tokens"]
        assert r["ttfb_ms"] < r["ttft_ms"] < r["total_ms"]
        assert not _errors(r)


def test_anthropic_sdk_thinking_stream(proxy, db_path):
    c = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test-000000000000000000000", max_retries=0)
    with c.messages.stream(model="claude-think-1", max_tokens=64,
                           messages=[{"role": "user", "content": "think first"}]) as s:
        text = "".join(s.text_stream)
    assert text
    proxy.flush()
    (r,) = rows(db_path)
    assert r["api"] == "anthropic.messages" and r["status"] == 200 and r["stream_done"] == 1
    assert r["first_token_ms"] < r["ttft_ms"]  # thinking arrived before the first visible text
    assert r["reasoning_chars"] > 0 and r["usage_prompt_tokens"] > 0
    assert r["key_header"] in ("x-api-key", "authorization")  # anthropic SDK 2.x sends Authorization
    assert r["key_fingerprint"] == "sk-ant-…0000" and not _errors(r)


def test_openai_responses_stream(proxy, db_path):
    c = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test-responses-000000000000000", max_retries=0)
    with c.responses.stream(model="gpt-4.1", input="Say hi.") as s:
        final = s.get_final_response()
    assert final.output_text
    proxy.flush()
    (r,) = rows(db_path)
    assert r["api"] == "openai.responses" and r["events"] == FAST["output_tokens"]
    assert r["usage_prompt_tokens"] and r["stream_done"] == 1 and not _errors(r)


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_stream(proxy, db_path):
    body = json.dumps({"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    out = subprocess.run(["curl", "-sS", "-N", proxy.url + "/v1/chat/completions", "-H", "content-type: application/json",
                          "-H", "authorization: Bearer sk-test-curl-000000000000000000", "-d", body],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    assert out.rstrip().endswith("data: [DONE]")
    proxy.flush()
    (r,) = rows(db_path)
    assert r["events"] == out.count('"content":"') - out.count('"content":""')
    assert r["response_bytes"] == len(out.encode())
