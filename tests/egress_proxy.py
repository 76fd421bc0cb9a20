"""An HTTP forward proxy on loopback that alone can resolve test host names (e.g. ``upstream.test``).

A connection that does not go through it cannot reach such a host (it does not resolve
anywhere else), so a test knows firsttoken's upstream leg really went through the proxy.
It speaks CONNECT (for TLS upstreams) and absolute-form requests (plain HTTP), optionally
demands Basic credentials (407 otherwise), and logs what it saw.
"""

from __future__ import annotations

import base64
import select
import socket
import socketserver
import threading


class EgressProxy:
    def __init__(self, hosts: dict[str, str], auth: tuple[str, str] | None = None, deny: tuple[str, ...] = ()) -> None:
        self.hosts = {k.lower(): v for k, v in hosts.items()}
        self.deny = {h.lower() for h in deny}  # its policy: 403 Forbidden for these hosts
        self.auth = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode() if auth else None
        self.log: list[tuple[str, str, str | None]] = []  # (method, target, Proxy-Authorization as received)
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                outer._handle(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._t = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> EgressProxy:
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- one client connection --------------------------------------------------------
    def _handle(self, c: socket.socket) -> None:
        c.settimeout(10)
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = c.recv(65536)
                if not data:
                    return
                buf += data
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ", 2)
            headers = [tuple(x.split(":", 1)) for x in lines[1:] if ":" in x]
            hmap = {k.strip().lower(): v.strip() for k, v in headers}
            self.log.append((method, target, hmap.get("proxy-authorization")))
            if self.auth and hmap.get("proxy-authorization") != self.auth:
                body = b"proxy credentials needed"
                c.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\n"
                          b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
                return
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                if host.lower() in self.deny:
                    c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    return
                up = self._connect(c, host, int(port))
                if up is None:
                    return
                c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if buf:
                    up.sendall(buf)
                self._pipe(c, up)
                return
            if not target.startswith("http://"):
                c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            rest = target[len("http://"):]
            hostport, _, path = rest.partition("/")
            host, _, port = hostport.partition(":")
            up = self._connect(c, host, int(port or 80))
            if up is None:
                return
            keep = [(k, v) for k, v in headers
                    if k.strip().lower() not in ("proxy-authorization", "proxy-connection", "connection")]
            out = f"{method} /{path} {version}\r\n" + "".join(f"{k}:{v}\r\n" for k, v in keep)
            out += "Connection: close\r\n\r\n"
            up.sendall(out.encode("latin-1") + buf)
            self._pipe(c, up)
            return

    def _connect(self, c: socket.socket, host: str, port: int) -> socket.socket | None:
        ip = self.hosts.get(host.lower().strip("[]"))
        if ip is None:
            body = f"proxy: cannot resolve {host}".encode()
            c.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                      b"Connection: close\r\n\r\n%s" % (len(body), body))
            return None
        try:
            return socket.create_connection((ip, port), timeout=10)
        except OSError as e:
            body = f"proxy: cannot connect to {host}:{port}: {e}".encode()
            c.sendall(b"HTTP/1.1 504 Gateway Timeout\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                      b"Connection: close\r\n\r\n%s" % (len(body), body))
            return None

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        socks = [a, b]
        try:
            while True:
                r, _, _ = select.select(socks, [], [], 30)
                if not r:
                    return
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)
        except OSError:
            return
        finally:
            b.close()
