"""The egress addon: firsttoken's upstream connections go the way the user's clients go.

It applies :func:`rules.decide` and the trusted CAs with mitmproxy's own upstream-proxy machinery
(``via`` + CONNECT for https://, absolute-form for plain http://); Capture calls :meth:`Egress.apply`
once a request is routed. Options and behaviour: docs/clients.md ("Behind a proxy").
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from typing import Any

from firsttoken.addon.egress import rules, trust

log = logging.getLogger("firsttoken")

_OPTIONS = ("firsttoken_upstream_proxy", "firsttoken_no_upstream_proxy", "firsttoken_upstream_ca",
            "ssl_verify_upstream_trusted_ca", "ssl_insecure")


class Egress:
    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._fixed_env = env  # tests and `run` may hand one in; else os.environ at configure
        self.env: dict[str, str] = dict(env if env is not None else os.environ)
        self.explicit: str | None = None
        self.disabled = False
        self._auth: dict[tuple[str, int], str] = {}  # proxy address -> Proxy-Authorization (memory only)
        self._decided: dict[tuple[str, str, int], rules.Decision] = {}
        self._issuers: dict[tuple[str, int], str] = {}  # upstream address -> issuer of the cert it showed
        self.ca_bundle: str | None = None  # the bundle this addon set as ssl_verify_upstream_trusted_ca
        self.ca_missing: list[tuple[str, str]] = []  # CA variables naming files that do not exist
        self._ca_dir: str | None = None

    # -- options -------------------------------------------------------------------
    def load(self, loader) -> None:
        loader.add_option("firsttoken_upstream_proxy", str, "",
                          "Reach the upstreams through this HTTP proxy (http://[user:pass@]host:port); replaces "
                          "HTTPS_PROXY/HTTP_PROXY/ALL_PROXY (NO_PROXY still applies). Empty: the environment's.")
        loader.add_option("firsttoken_no_upstream_proxy", bool, False,
                          "Connect to the upstreams directly, whatever HTTPS_PROXY/HTTP_PROXY/ALL_PROXY say.")
        loader.add_option("firsttoken_upstream_ca", str, "",
                          "A PEM file of CA certificates to trust for the upstream's TLS, besides the system "
                          "store, certifi, SSL_CERT_FILE and REQUESTS_CA_BUNDLE.")

    def configure(self, updated: set[str]) -> None:
        from mitmproxy import ctx, exceptions

        if not set(updated) & set(_OPTIONS):
            return
        o = ctx.options
        explicit = (o.firsttoken_upstream_proxy or "").strip() or None
        if explicit and o.firsttoken_no_upstream_proxy:
            raise exceptions.OptionsError("--upstream-proxy and --no-upstream-proxy contradict each other: give one.")
        self.env = dict(self._fixed_env if self._fixed_env is not None else os.environ)
        try:
            rules.check(self.env, explicit=explicit, disabled=o.firsttoken_no_upstream_proxy)
        except rules.EgressError as e:
            raise exceptions.OptionsError(str(e)) from None
        self.explicit, self.disabled = explicit, bool(o.firsttoken_no_upstream_proxy)
        self._auth.clear()
        self._decided.clear()
        mine = o.ssl_verify_upstream_trusted_ca in (None, "") or o.ssl_verify_upstream_trusted_ca == self.ca_bundle
        if mine and not o.ssl_insecure:
            try:
                self._set_bundle(o)
            except trust.TrustError as e:
                raise exceptions.OptionsError(str(e)) from None
        elif (o.firsttoken_upstream_ca or "").strip() and not o.ssl_insecure:
            raise exceptions.OptionsError(
                "firsttoken_upstream_ca is ignored while ssl_verify_upstream_trusted_ca names your own bundle: "
                "add the CA to that bundle, or set only one of the two.")

    def _set_bundle(self, o) -> None:
        extra = (o.firsttoken_upstream_ca or "").strip() or None
        trust.check_extra(extra)
        src = trust.sources(self.env, extra)
        self.ca_missing = src.missing
        for var, path in src.missing:
            log.warning("firsttoken: %s names %s, which does not exist: its CAs are not trusted for upstreams "
                        "(fix or unset %s).", var, path, var)
        if self._ca_dir is None:
            import tempfile

            self._ca_dir = tempfile.mkdtemp(prefix="firsttoken-ca-")
        self.ca_bundle = str(trust.write_bundle(src, self._ca_dir))
        if o.ssl_verify_upstream_trusted_ca != self.ca_bundle:
            o.ssl_verify_upstream_trusted_ca = self.ca_bundle

    def done(self) -> None:
        if self._ca_dir:
            shutil.rmtree(self._ca_dir, ignore_errors=True)
            self._ca_dir = None

    # -- the rule for one request ----------------------------------------------------
    def decide(self, scheme: str, host: str, port: int) -> rules.Decision:
        """The rule for one upstream, cached per (scheme, host, port): it runs on the event loop."""
        key = (scheme, host, port)
        d = self._decided.get(key)
        if d is None:
            try:
                d = rules.decide(scheme, host, port, self.env, explicit=self.explicit, disabled=self.disabled)
            except rules.EgressError as e:  # checked at configure; a late change of the environment lands here
                d = rules.Decision(None, f"unusable proxy setting ({e})")
            if len(self._decided) > 1024:
                self._decided.clear()
            self._decided[key] = d
        return d

    def apply(self, flow: Any) -> str | None:
        """Send this request's upstream connection the way the rule says; the proxy's URL (no
        credentials) or None when it goes direct. Call once the request's target is final."""
        req = flow.request
        mode = getattr(flow.client_conn, "proxy_mode", None)
        if type(mode).__name__ == "UpstreamMode":  # mitmdump --mode upstream:URL: mitmproxy's mode decides
            scheme, (host, port) = mode.scheme, mode.address
            return f"{scheme}://{host}:{port}"
        d = self.decide(req.scheme, req.host, req.port)
        p = d.proxy
        via = None
        if p is not None and req.scheme == "http" and p.scheme == "http":
            # absolute-form to the proxy: mitmproxy's own request-line form when authority is set (in
            # reverse mode its `via` layer would CONNECT even for plain HTTP, which proxies refuse
            # for ports other than 443)
            target = req.host if ":" not in req.host else f"[{req.host}]"
            req.authority = target if req.port == 80 else f"{target}:{req.port}"
            req.data.host, req.data.port = p.host, p.port
            auth = p.authorization()
            if auth:
                req.headers["Proxy-Authorization"] = auth
        elif p is not None:
            auth = p.authorization()
            if auth:
                self._auth[(p.host, p.port)] = auth
            via = (p.scheme, (p.host, p.port))
        flow.metadata[VIA] = via
        self.request(flow)
        return p.url if p is not None else None

    # -- hooks -----------------------------------------------------------------------
    def request(self, flow: Any) -> None:
        """Again just before mitmproxy opens the connection: on an HTTP/2 client connection
        another stream may have set the shared server object's ``via`` since requestheaders."""
        if VIA not in flow.metadata:
            return
        want, server = flow.metadata[VIA], flow.server_conn
        if server is not None and not _is_open(server) and server.via != want:
            server.via = want

    def next_layer(self, nextlayer: Any) -> None:
        """Forward mode: a CONNECT that is tunnelled untouched (not an LLM host) goes out through
        the egress proxy too, as mitmproxy's upstream mode tunnels it: HttpUpstreamProxy (a CONNECT
        to the proxy) under the TCP layer mitmproxy chose."""
        from mitmproxy.proxy import mode_specs
        from mitmproxy.proxy.layers import tcp

        layer, ctx = nextlayer.layer, nextlayer.context
        if not isinstance(layer, tcp.TCPLayer) or not isinstance(ctx.client.proxy_mode, mode_specs.RegularMode):
            return
        server = ctx.server
        if not server.address or server.via is not None or _is_open(server):
            return
        d = self.decide("https", server.address[0], server.address[1])  # a CONNECT tunnel: the https way
        if d.proxy is None:
            return
        from mitmproxy.proxy.layers.http._upstream_proxy import HttpUpstreamProxy

        p = d.proxy
        auth = p.authorization()
        if auth:
            self._auth[(p.host, p.port)] = auth
        server.via = (p.scheme, (p.host, p.port))
        stack = HttpUpstreamProxy.make(ctx, True)
        stack /= layer
        nextlayer.layer = stack[0]

    def http_connect_upstream(self, flow: Any) -> None:
        """mitmproxy is about to send CONNECT to an upstream proxy: add its credentials (as
        mitmproxy's own ``upstream_auth`` addon does)."""
        try:
            addr = (flow.server_conn.address[0], flow.server_conn.address[1])
        except (AttributeError, TypeError, IndexError):
            return
        auth = self._auth.get(addr)
        if auth:
            flow.request.headers["Proxy-Authorization"] = auth

    def tls_failed_server(self, data: Any) -> None:
        """Remember who issued the certificate an upstream showed, for the finding (cheap: no I/O)."""
        try:
            chain = data.ssl_conn.get_peer_cert_chain() if data.ssl_conn is not None else None
            addr = data.conn.address
        except Exception:  # noqa: BLE001 - pyOpenSSL states vary; the finding then names no issuer
            return
        if chain and addr:
            parts = _issuer(chain[0])
            if parts:
                self._issuers[(addr[0], addr[1])] = ", ".join(parts)[:200]
                if len(self._issuers) > 256:
                    self._issuers.pop(next(iter(self._issuers)))

    def annotate_error(self, msg: str, host: str | None, port: int | None) -> str:
        """mitmproxy's TLS verification error, with the issuer of the rejected certificate."""
        if "certificate verify failed" not in msg.lower() or host is None or port is None:
            return msg
        issuer = self._issuers.get((host, port))
        return f"{msg} (certificate issued by {issuer})" if issuer else msg


#: flow.metadata: the ``via`` (scheme, (host, port)) chosen by Capture's call to apply, or None
VIA = "firsttoken.egress"

ISSUER = re.compile(r"\(certificate issued by (.+?)\)\s*$")


def _issuer(cert: Any) -> list[str]:
    """CN= and O= of a pyOpenSSL (or cryptography) certificate's issuer."""
    from cryptography.x509.oid import NameOID

    try:
        c = cert.to_cryptography() if hasattr(cert, "to_cryptography") else cert
        return [f"{label}={a.value}" for label, oid in (("CN", NameOID.COMMON_NAME), ("O", NameOID.ORGANIZATION_NAME))
                for a in c.issuer.get_attributes_for_oid(oid)]
    except Exception:  # noqa: BLE001 - an odd certificate: the finding then names no issuer
        return []


def _is_open(server: Any) -> bool:
    try:
        return bool(server.connected)
    except AttributeError:
        return False
