"""A loopback upstream that sends exactly the bytes a test gives it (for byte-identity and garbage)."""

from __future__ import annotations

import hashlib
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class RawUpstream:
    """Serves ``chunks`` (list of bytes) with ``delay`` seconds between them, chunked encoding."""

    def __init__(self, chunks: list[bytes], headers: dict[str, str] | None = None, delay: float = 0.0, status: int = 200):
        self.chunks = chunks
        self.headers = headers or {"content-type": "text/event-stream"}
        self.delay = delay
        self.status = status
        self.sent = hashlib.sha256()
        self.requests: list[tuple[str, dict, bytes]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else b""
                outer.requests.append((self.path, dict(self.headers), body))
                self.send_response(outer.status)
                for k, v in outer.headers.items():
                    self.send_header(k, v)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for c in outer.chunks:
                    if outer.delay:
                        time.sleep(outer.delay)
                    outer.sent.update(c)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(c), c))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            do_GET = do_POST

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._t = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
