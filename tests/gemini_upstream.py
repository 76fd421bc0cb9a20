"""A loopback Gemini API upstream for tests: ``generateContent`` / ``streamGenerateContent?alt=sse`` answers
built from a schedule of GenerateContentResponse chunks, each one's send time logged (``rawserver.Replay``)."""

from __future__ import annotations

import json
import time

from rawserver import Replay

SSE = [("content-type", "text/event-stream"), ("x-goog-request-id", "gr-1")]
JSON = [("content-type", "application/json; charset=UTF-8")]

#: one reasoning chunk, two visible text chunks, a function call, then the finish with usage
STREAM = [
    {"candidates": [{"content": {"parts": [{"text": "Thinking about it", "thought": True}], "role": "model"},
                     "index": 0}], "modelVersion": "gemini-2.5-flash", "responseId": "resp-1"},
    {"candidates": [{"content": {"parts": [{"text": "Paris is"}], "role": "model"}, "index": 0}],
     "modelVersion": "gemini-2.5-flash", "responseId": "resp-1"},
    {"candidates": [{"content": {"parts": [{"text": " the capital."}], "role": "model"}, "index": 0}],
     "modelVersion": "gemini-2.5-flash", "responseId": "resp-1"},
    {"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": "STOP", "index": 0}],
     "usageMetadata": {"promptTokenCount": 21, "candidatesTokenCount": 6, "thoughtsTokenCount": 9,
                       "cachedContentTokenCount": 8, "totalTokenCount": 36},
     "modelVersion": "gemini-2.5-flash", "responseId": "resp-1"},
]
#: the index of the first chunk with visible text, and of the first with any token
FIRST_VISIBLE, FIRST_TOKEN = 1, 0


def sse_parts(chunks: list[dict]) -> list[bytes]:
    """Google frames each chunk as ``data: {json}`` and a blank line, with CRLF line ends."""
    return [b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\r\n\r\n" for c in chunks]


def stream_replay(chunks: list[dict] = STREAM, gaps: list[float] | None = None) -> Replay:
    return Replay(200, SSE, sse_parts(chunks), gaps or [0.15] + [0.05] * (len(chunks) - 1))


def body_replay(body: dict, status: int = 200) -> Replay:
    return Replay(status, JSON, [json.dumps(body).encode()], framing="length")


def google_error(code: int, status: str, message: str, *details: dict) -> dict:
    """Google's error body: ``{"error": {"code", "message", "status", "details"}}``."""
    err: dict = {"code": code, "message": message, "status": status}
    if details:
        err["details"] = list(details)
    return {"error": err}


KEY_INVALID = google_error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
                           {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                            "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}})
PERMISSION_DENIED = google_error(403, "PERMISSION_DENIED",
                                 "Generative Language API has not been used in project 123 before or it is disabled.",
                                 {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED"})
QUOTA = google_error(429, "RESOURCE_EXHAUSTED",
                     "You exceeded your current quota, please check your plan and billing details.",
                     {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                      "violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
                     {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "17s"})
NOT_FOUND = google_error(404, "NOT_FOUND", "models/gemini-9-ultra is not found for API version v1beta, or is not "
                         "supported for generateContent. Call ListModels to see the list of available models.")
OVERLOADED = google_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")
DEADLINE = google_error(504, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete.")
BLOCKED = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
           "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7}, "modelVersion": "gemini-2.5-flash"}


GEMINI_TEXT = "Hello from the Gemini upstream"


class GeminiUpstream:
    """A Gemini API on loopback for whole clients (Gemini CLI): every ``:streamGenerateContent`` is answered
    with a short SSE stream of ``GEMINI_TEXT``, ``:generateContent`` with it as JSON (or ``{}`` in JSON mode),
    ``:countTokens`` with a count; ``arrivals`` logs (method, path, headers) of each request."""

    def __init__(self) -> None:
        from rawserver import LoopbackServer

        outer = self
        self.arrivals: list[tuple[str, str, dict[str, str]]] = []

        from http.server import BaseHTTPRequestHandler

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _reply(self, status: int, ctype: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                n = int(self.headers.get("content-length") or 0)
                req = self.rfile.read(n) if n else b""
                outer.arrivals.append(("POST", self.path, {k.lower(): v for k, v in self.headers.items()}))
                path = self.path.split("?", 1)[0]
                usage = {"promptTokenCount": 40, "candidatesTokenCount": 6, "totalTokenCount": 46}
                if path.endswith(":countTokens"):
                    return self._reply(200, "application/json", b'{"totalTokens": 40}')
                try:
                    cfg = json.loads(req or b"{}").get("generationConfig") or {}
                except ValueError:
                    cfg = {}
                # JSON mode: Gemini CLI's model router asks for a complexity verdict
                text = (json.dumps({"complexity_reasoning": "a greeting", "complexity_score": 1})
                        if cfg.get("responseMimeType") == "application/json" else GEMINI_TEXT)
                if path.endswith(":streamGenerateContent"):
                    words = text.split(" ")
                    chunks = [{"candidates": [{"content": {"parts": [{"text": w + (" " if i < len(words) - 1 else "")}],
                                                           "role": "model"}, "index": 0}],
                               "modelVersion": "gemini-2.5-flash"} for i, w in enumerate(words)]
                    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
                    chunks[-1]["usageMetadata"] = usage
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    for part in sse_parts(chunks):
                        time.sleep(0.01)
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    return None
                if path.endswith(":generateContent"):
                    body = {"candidates": [{"content": {"parts": [{"text": text}], "role": "model"},
                                            "finishReason": "STOP", "index": 0}],
                            "usageMetadata": usage, "modelVersion": "gemini-2.5-flash"}
                    return self._reply(200, "application/json", json.dumps(body).encode())
                return self._reply(404, "application/json", json.dumps(google_error(404, "NOT_FOUND", "no such method"))
                                   .encode())

            def do_GET(self):
                outer.arrivals.append(("GET", self.path, {k.lower(): v for k, v in self.headers.items()}))
                self._reply(404, "application/json", json.dumps(google_error(404, "NOT_FOUND", "not here")).encode())

        self._server = LoopbackServer()
        self._server.serve(H)
        self.url = self._server.url

    def __enter__(self) -> GeminiUpstream:
        self._server.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._server.__exit__(*exc)
