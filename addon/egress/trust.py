"""The CAs an upstream's TLS certificate is verified against: what the user's clients trust.

mitmproxy alone trusts certifi's bundle; firsttoken adds the system store, the CA variables and
``--upstream-ca``, written once per start as one PEM bundle. See docs/clients.md ("TLS: the CAs your clients trust").
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: the variables a client on this machine reads extra (or replacement) CAs from
CA_VARS = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
#: the ones firsttoken adds to its bundle (NODE_EXTRA_CA_CERTS and CURL_CA_BUNDLE too: a user
#: who set them for their client's proxy CA wants the same CA trusted here)
PEM_BEGIN = "-----BEGIN CERTIFICATE-----"


@dataclass
class Sources:
    files: list[tuple[str, Path]] = field(default_factory=list)  # (where it came from, file)
    missing: list[tuple[str, str]] = field(default_factory=list)  # (variable, path) that do not exist


def system_store() -> Path | None:
    """This machine's CA bundle file (OpenSSL's default), if there is one."""
    paths = ssl.get_default_verify_paths()
    for p in (paths.cafile, paths.openssl_cafile, "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"):
        if p and Path(p).is_file():
            return Path(p)
    return None


def sources(env: Mapping[str, str], extra: str | None = None) -> Sources:
    """The CA files to trust: certifi (mitmproxy's default), the system store, the variables, ``extra``."""
    out = Sources()
    try:
        import certifi

        out.files.append(("certifi", Path(certifi.where())))
    except Exception:  # noqa: BLE001 - mitmproxy depends on certifi; without it the rest still counts
        pass
    store = system_store()
    if store is not None:
        out.files.append(("the system store", store))
    for var in CA_VARS:
        value = (env.get(var) or "").strip()
        if not value:
            continue
        p = Path(value).expanduser()
        if p.is_file():
            out.files.append((var, p))
        else:
            out.missing.append((var, value))
    if extra:
        out.files.append(("--upstream-ca", Path(extra).expanduser()))
    return out


class TrustError(ValueError):
    pass


def check_extra(extra: str | None) -> None:
    """Raise TrustError when ``--upstream-ca`` names no file (`proxy` at configure, `run` before its child)."""
    if extra and not os.path.isfile(os.path.expanduser(extra)):
        raise TrustError(f"--upstream-ca {extra}: no such file. Give the PEM file of the CA that signs your "
                         "upstream's (or your company proxy's) certificates.")


def read_pem(path: Path, what: str) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise TrustError(f"{what} {path} cannot be read: {e.strerror or e}. Give a PEM file of CA certificates.") from None
    if PEM_BEGIN not in text:
        raise TrustError(f"{what} {path} holds no PEM certificate ('{PEM_BEGIN}'): give the CA as a PEM file "
                         "(convert a DER .cer/.crt with: openssl x509 -inform der -in CA.cer -out CA.pem).")
    return text


def write_bundle(src: Sources, folder: str | None = None) -> Path:
    """One PEM file with every source's certificates (0600 in a fresh 0700 folder)."""
    parts = []
    seen: set[Path] = set()
    for what, path in src.files:
        real = path.resolve()
        if real in seen:
            continue
        seen.add(real)
        try:
            parts.append(read_pem(path, what))
        except TrustError:
            if what == "--upstream-ca":
                raise
            continue  # a variable's file that is no CA bundle: the client would fail on it, not us
    d = Path(folder) if folder else Path(tempfile.mkdtemp(prefix="firsttoken-ca-"))
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    out = d / "upstream-ca-bundle.pem"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(p.rstrip("\n") for p in parts) + "\n")
    return out
