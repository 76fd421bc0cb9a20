"""A loopback upstream that speaks Anthropic on Bedrock (AWS event stream, Converse) and on Vertex AI
(SSE, model in the URL), on a known schedule, logging when it sent each event and what it received.
With ``check_signature`` it verifies SigV4 against the Host it received, as AWS does (via botocore)."""

from __future__ import annotations

import json
import re
import time
from http.server import BaseHTTPRequestHandler

from bedrock_wire import METRICS, anthropic_events, chunk_frame, converse_frames, exception_frame
from rawserver import LoopbackServer

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SIGNATURE_MISMATCH = ("The request signature we calculated does not match the signature you provided. "
                      "Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")


def signature_ok(method: str, host: str, path: str, headers: dict[str, str], body: bytes) -> bool:
    """Whether the request's SigV4 signature is right for the Host it arrived with."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    auth = headers.get("authorization", "")
    m = re.search(r"Credential=([^/]+)/\d{8}/([^/]+)/([^/]+)/aws4_request, SignedHeaders=([^,]+), Signature=(\w+)", auth)
    if not m:
        return False
    key_id, region, service, signed, sig = m.groups()
    hdrs = {k: v for k, v in headers.items() if k in signed.split(";") and k != "host"}
    hdrs["host"] = host
    req = AWSRequest(method=method, url=f"http://{host}{path}", data=body, headers=hdrs)
    req.context["timestamp"] = headers.get("x-amz-date", "")
    signer = SigV4Auth(Credentials(key_id, SECRET, headers.get("x-amz-security-token")), service, region)
    want = signer.signature(signer.string_to_sign(req, signer.canonical_request(req)), req)
    return want == sig


class CloudUpstream(LoopbackServer):
    def __init__(self, gap: float = 0.02, first_after: float = 0.1, check_signature: bool = False):
        self.gap, self.first_after, self.check_signature = gap, first_after, check_signature
        self.log: list[dict] = []  # one per request: path, headers, body, received, first_visible_sent, sent bytes
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                received = time.perf_counter()
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                entry = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body,
                         "received": received, "first_visible_sent": None, "sent": b""}
                outer.log.append(entry)
                outer.route(self, entry)

        self.serve(H)

    # -- answers -------------------------------------------------------------------
    def route(self, h: BaseHTTPRequestHandler, e: dict) -> None:
        path = e["path"].split("?", 1)[0]
        if "/model/" in path and self.check_signature and not signature_ok(
                "POST", e["headers"].get("host", ""), path, e["headers"], e["body"]):
            return self.json(h, 403, {"message": SIGNATURE_MISMATCH}, {"x-amzn-ErrorType": "InvalidSignatureException:http://internal.amazon.com/coral/com.amazon.coral.service/"})
        model = path.split("/model/", 1)[1].split("/", 1)[0] if "/model/" in path else ""
        if path.endswith("/invoke-with-response-stream"):
            frames = [chunk_frame(ev) for ev in anthropic_events(tool="tool" in model)]
            if "exception" in model:
                frames = frames[:6] + [exception_frame(model.split("exception-", 1)[1].split(":")[0], "Too many tokens, please wait before trying again.")]
            if "corrupt" in model:
                bad = bytearray(frames[7])
                bad[len(bad) // 2] ^= 0xFF
                frames[7] = bytes(bad)
            return self.stream(h, e, frames, "application/vnd.amazon.eventstream", visible_from=5)
        if path.endswith("/converse-stream"):
            return self.stream(h, e, converse_frames(), "application/vnd.amazon.eventstream", visible_from=3)
        if path.endswith("/invoke"):
            msg = {"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
                   "content": [{"type": "text", "text": "Hello!"}], "stop_reason": "end_turn",
                   "usage": {"input_tokens": 10, "output_tokens": 3}}
            return self.json(h, 200, msg, {"x-amzn-bedrock-invocation-latency": str(METRICS["invocationLatency"]),
                                           "x-amzn-bedrock-input-token-count": "10", "x-amzn-bedrock-output-token-count": "3"})
        if path.endswith(":streamRawPredict"):
            auth = e["headers"].get("authorization")
            if auth is not None and not auth.startswith("Bearer "):  # (none at all: a gateway signs, SKIP_VERTEX_AUTH)
                return self.json(h, 401, {"error": {"code": 401, "message": "Request had invalid authentication credentials.",
                                                    "status": "UNAUTHENTICATED"}})
            events = [f"event: {ev['type']}\ndata: {json.dumps(ev)}\n\n".encode() for ev in anthropic_events(metrics=None)]
            return self.stream(h, e, events, "text/event-stream", visible_from=5)
        if path.endswith(":rawPredict"):
            msg = {"id": "msg_3", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5@20250929",
                   "content": [{"type": "text", "text": "Hi there"}], "stop_reason": "end_turn",
                   "usage": {"input_tokens": 9, "output_tokens": 2}}
            return self.json(h, 200, msg)
        self.json(h, 404, {"message": f"no such path {path}"})

    def json(self, h, status: int, obj: dict, headers: dict | None = None) -> None:
        data = json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    def stream(self, h, e: dict, chunks: list[bytes], ctype: str, visible_from: int) -> None:
        h.send_response(200)
        h.send_header("content-type", ctype)
        h.send_header("transfer-encoding", "chunked")
        h.send_header("x-amzn-requestid", "req-123")
        h.end_headers()
        h.wfile.flush()
        for i, c in enumerate(chunks):
            time.sleep(self.first_after if i == 0 else self.gap)
            if i == visible_from:  # stamped before it leaves: the proxy may read it before this thread runs again
                e["first_visible_sent"] = time.perf_counter()
            h.wfile.write(b"%x\r\n%s\r\n" % (len(c), c))
            h.wfile.flush()
            e["sent"] += c
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()
