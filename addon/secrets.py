"""Keys never reach disk: fingerprints of credentials, and redaction of bodies.

A fingerprint keeps just enough to explain a 401 later ("sk-…a1b2, 52 chars, trailing
whitespace") without the secret itself.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

#: the headers an LLM API reads its key from: the key the record's fingerprint describes
KEY_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key")
#: headers whose values never leave memory (bodies are redacted separately); any header whose
#: name says it holds a credential joins them (``is_secret_header``: ``x-portkey-api-key``...)
SECRET_HEADERS = frozenset(KEY_HEADERS + ("cookie", "set-cookie", "proxy-authorization"))
#: credentials that are never the API key a fingerprint describes
_NOT_KEYS = frozenset({"cookie", "set-cookie", "proxy-authorization"})

_KEYLIKE = re.compile(
    r"(sk-ant-[A-Za-z0-9_\-]{8,}|sk-[A-Za-z0-9_\-]{12,}|Bearer\s+[A-Za-z0-9._\-]{12,}"
    r"|AIza[0-9A-Za-z_\-]{20,}|(?:AKIA|ASIA)[0-9A-Z]{16}|eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]+)"
)


#: what each key fact says, in words every message uses (doctor's checks, the auth findings):
#: a predicate of "the key" in English and Chinese
KEY_FACT_TEXT: dict[str, dict[str, str]] = {
    "empty": {"en": "is empty", "zh": "为空"},
    "newline": {"en": "contains a line break (pasted with its newline?)", "zh": "包含换行符（连换行一起粘贴了？）"},
    "escaped_newline": {"en": "contains a literal \\n (an escaped line break)", "zh": "包含字面的 \\n（被转义的换行）"},
    "quoted": {"en": "is wrapped in quotes (the quotes became part of the value)", "zh": "被引号包住（引号成了值的一部分）"},
    "unexpanded_variable": {"en": "looks like an unexpanded variable ($VAR / ${VAR})", "zh": "像是没有展开的变量（$VAR / ${VAR}）"},
    "leading_whitespace": {"en": "starts with whitespace", "zh": "开头有空白"},
    "trailing_whitespace": {"en": "ends with whitespace (a pasted space or newline)", "zh": "末尾有空白（粘贴进来的空格或换行）"},
    "inner_whitespace": {"en": "contains a space inside", "zh": "中间有空格"},
    "non_ascii": {"en": "contains non-ASCII characters (a smart quote or dash from a web page?)",
                  "zh": "包含非 ASCII 字符（从网页复制来的弯引号或破折号？）"},
}


def key_fact_text(fact: str, lang: str = "en") -> str:
    """The words for one key fact (the fact's name when it has none)."""
    entry = KEY_FACT_TEXT.get(fact)
    return (entry.get(lang) or entry["en"]) if entry else fact


@dataclass
class KeyFingerprint:
    header: str | None = None  # which header(s) carried a credential, e.g. "authorization+x-api-key"
    fingerprint: str | None = None  # "sk-…a1b2"
    scheme: str | None = None  # "Bearer", "Basic", "raw" (no scheme), "" when missing
    length: int | None = None  # length of the key itself, after the scheme
    facts: list[str] = field(default_factory=list)


def mask(key: str) -> str:
    """A short, non-reversible label: the key's prefix (up to 3 chars) and last 4 chars."""
    core = key.strip().strip("\"'")
    if len(core) < 12:
        return "…"  # too short to show any of it; every view gives the key's length beside this
    head = core[:3]
    for known in ("sk-ant-", "sk-proj-", "sk-or-", "sk-"):
        if core.startswith(known):
            head = known
            break
    return f"{head}…{core[-4:]}"


def facts_for(raw: str) -> list[str]:
    facts: list[str] = []
    if raw == "" or raw.strip() == "":
        return ["empty"]
    if raw != raw.lstrip():
        facts.append("leading_whitespace")
    if raw != raw.rstrip():
        facts.append("trailing_whitespace")
    if "\n" in raw or "\r" in raw:
        facts.append("newline")
    if "\\n" in raw or "%0A" in raw.upper():
        facts.append("escaped_newline")
    s = raw.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        facts.append("quoted")
    if any(c.isspace() for c in s):
        facts.append("inner_whitespace")
    if any(ord(c) > 126 for c in s):
        facts.append("non_ascii")
    if s.startswith("${") or s.startswith("$") and s[1:].isupper():
        facts.append("unexpanded_variable")
    return facts


def fingerprint_headers(headers: list[tuple[str, str]]) -> KeyFingerprint:
    """Fingerprint the credential headers of a request (``(name, value)`` pairs, any case): the
    API key headers (``KEY_HEADERS``), else a gateway's own (``x-portkey-api-key``, ``helicone-auth``)."""
    found = [(n.lower(), v) for n, v in headers if n.lower() in KEY_HEADERS]
    fp = KeyFingerprint()
    if not found:
        gateway = [(n.lower(), v) for n, v in headers if n.lower() not in _NOT_KEYS and is_secret_header(n)]
        if gateway:
            return _fingerprint_other(gateway)
        fp.scheme = ""
        fp.facts = ["missing"]
        return fp
    names = []
    for n, _ in found:
        if n not in names:
            names.append(n)
    fp.header = "+".join(names)
    name, value = found[0]
    facts: list[str] = []
    if len(names) > 1:
        facts.append("multiple_headers")
    if name == "authorization" and value.lstrip().startswith(SIGV4):
        return sigv4_fingerprint(value, names)
    if name == "authorization":
        stripped = value.lstrip()
        scheme, _, rest = stripped.partition(" ")
        if scheme.lower() in ("bearer", "basic", "token") and rest:
            fp.scheme = scheme
            if scheme != "Bearer" and scheme.lower() == "bearer":
                facts.append("bearer_case")
            key = rest
            if value != stripped:
                facts.append("leading_whitespace")
            if key.lower().startswith("bearer "):  # "Bearer Bearer sk-…": the key itself carries the scheme
                facts.append("bearer_in_api_key")
                key = key[7:]
        else:
            fp.scheme = "raw"
            key = value
            facts.append("no_scheme")
    else:
        fp.scheme = "raw"
        key = value
        if key.lower().startswith("bearer "):
            facts.append("bearer_in_api_key")
            key = key[7:]
    facts += [f for f in facts_for(key) if f not in facts]
    if len(names) > 1:
        # A login token and an API key together (e.g. ANTHROPIC_AUTH_TOKEN and ANTHROPIC_API_KEY).
        other = [v for n, v in found if n != name]
        if other and other[0].strip() != key.strip():
            facts.append("conflicting_keys")
    fp.fingerprint = mask(key) if "empty" not in facts else None
    fp.length = len(key.strip())
    fp.facts = facts
    return fp


#: AWS Signature Version 4: ``AWS4-HMAC-SHA256 Credential=AKIA…/date/region/service/aws4_request, …``
SIGV4 = "AWS4-HMAC-SHA256"
_SIGV4_PART = re.compile(r"(Credential|SignedHeaders|Signature)\s*=\s*([^,\s]*)")


def sigv4_parts(value: str) -> dict[str, str]:
    """Credential, SignedHeaders and Signature of a SigV4 Authorization value (memory only)."""
    return {m.group(1): m.group(2) for m in _SIGV4_PART.finditer(value)}


def sigv4_fingerprint(value: str, names: list[str]) -> KeyFingerprint:
    """A SigV4 request's fingerprint: the access key id's (``AKI…WXYZ``), never the signature, which
    changes with every request and means nothing once stored. The region and service are no secret."""
    cred = sigv4_parts(value).get("Credential", "")
    key_id, _, scope = cred.partition("/")
    facts = [] if key_id else ["empty"]
    if len(names) > 1:
        facts.append("multiple_headers")
    scope_parts = scope.split("/")
    if len(scope_parts) >= 3:  # date/region/service/aws4_request: which region and service it was signed for
        facts.append(f"sigv4:{scope_parts[1][:30]}/{scope_parts[2][:30]}")
    return KeyFingerprint(header="+".join(names), fingerprint=mask(key_id) if key_id else None, scheme=SIGV4,
                          length=len(key_id), facts=facts)


def _fingerprint_other(found: list[tuple[str, str]]) -> KeyFingerprint:
    """The fingerprint of a key in a header firsttoken does not know (a gateway's): its value's
    facts only, since the header's format (a scheme or none) is that gateway's business."""
    name, value = found[0]
    scheme, _, rest = value.lstrip().partition(" ")
    has_scheme = scheme.lower() in ("bearer", "basic", "token") and bool(rest)
    key = rest if has_scheme else value
    facts = facts_for(key)
    return KeyFingerprint(header=name, fingerprint=mask(key) if "empty" not in facts else None,
                          scheme=scheme if has_scheme else "raw", length=len(key.strip()), facts=facts)


#: field names (lower case, without ``_`` and ``-``) whose values are credentials, whatever they look like
SECRET_FIELDS = frozenset({
    "key", "apikey", "token", "secret", "password", "passwd", "pwd", "authorization", "auth", "credential",
    "credentials", "accesstoken", "refreshtoken", "idtoken", "sessiontoken", "authtoken", "bearer",
    "clientsecret", "privatekey", "secretkey", "accesskey", "accesskeyid", "secretaccesskey", "xapikey",
    "apitoken", "subscriptionkey", "ocpapimsubscriptionkey",
})
#: ... and names ending like these (``openai_api_key``, ``azureApiKey``, ``github_token``)
_SECRET_SUFFIXES = ("apikey", "secret", "password", "accesstoken", "authtoken", "apitoken", "privatekey",
                    "secretkey", "accesskey", "sessiontoken", "refreshtoken")
#: the head of ``"name": "value"`` / ``'name': 'value'`` (JSON, a Python repr quoted in an error),
#: also inside an escaped JSON string (``\\"name\\": \\"value\\"``). Only the head is a regex:
#: the value's end is found by a scan (see ``_value_end``), linear in the text. A regex for the
#: value backtracked exponentially on real Claude Code bodies (escaped JSON inside strings).
_FIELD_HEAD = re.compile(r"""(?P<q>\\{0,3}["'])(?P<name>[A-Za-z_][\w\-]{0,63})(?P=q)\s*:\s*(?P<vq>\\{0,3}["'])""")
#: the longest value redaction looks at
FIELD_VALUE_MAX = 4096
#: ``name=value`` in a form body or a query string quoted back
_PAIR = re.compile(r"(?P<pre>(?:^|[?&\s,;]))(?P<name>[A-Za-z_][\w\-]{0,63})=(?P<value>[^&\s\"',;]{1,4096})")


def is_secret_field(name: str) -> bool:
    """Whether a field called ``name`` holds a credential (``api_key``, ``apiKey``, ``token``...)."""
    n = name.lower().replace("_", "").replace("-", "")
    return n in SECRET_FIELDS or n.endswith(_SECRET_SUFFIXES)


def body_secrets(body: Any, _depth: int = 0) -> list[str]:
    """The string values of credential-named fields anywhere in a parsed JSON body."""
    out: list[str] = []
    if _depth > 64:
        return out
    if isinstance(body, dict):
        for k, v in body.items():
            if isinstance(v, str) and isinstance(k, str) and is_secret_field(k):
                if v.strip():
                    out.append(v)
            elif isinstance(v, (dict, list)):
                out += body_secrets(v, _depth + 1)
    elif isinstance(body, list):
        for v in body[:10_000]:
            if isinstance(v, (dict, list)):
                out += body_secrets(v, _depth + 1)
    return out


def _value_end(text: str, start: int, quote: str) -> int | None:
    """Where a quoted value that began at ``start`` ends: the next ``quote`` not escaped by a
    backslash (an odd run of backslashes before it), within FIELD_VALUE_MAX; None if none."""
    stop = min(len(text), start + FIELD_VALUE_MAX + len(quote))
    i = start
    while True:
        j = text.find(quote, i, stop)
        if j < 0:
            return None
        k = j
        while k > start and text[k - 1] == "\\":
            k -= 1
        if (j - k) % 2 == 0:
            return j if j > start else None
        i = j + 1


def _redact_fields(text: str) -> str:
    """The values of credential-named fields replaced by ``[REDACTED]``. Every field head in the
    text is looked at, so a value that itself quotes JSON (an error message echoing the body) is
    searched too: the scan only skips what it redacted."""
    out, pos = [], 0
    for m in _FIELD_HEAD.finditer(text):
        if m.start() < pos or not is_secret_field(m.group("name")):
            continue
        end = _value_end(text, m.end(), m.group("vq"))
        if end is None:
            continue
        out += [text[pos:m.end()], "[REDACTED]"]
        pos = end
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def _pair(m: re.Match[str]) -> str:
    if not is_secret_field(m.group("name")):
        return m.group(0)
    return f"{m.group('pre')}{m.group('name')}=[REDACTED]"


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    """Remove credentials from text before it is stored or printed: the known secret values
    of this request wherever they appear, the values of credential-named fields
    (``"api_key": "…"``, ``token=…``), and key-shaped strings (``sk-…``, ``Bearer …``, JWTs)."""
    for s in sorted({s.strip() for s in secrets or ()}, key=len, reverse=True):
        if len(s) >= 8:
            text = text.replace(s, "[REDACTED]")
    if "=" in text:
        text = _PAIR.sub(_pair, text)
    if ":" in text:
        text = _redact_fields(text)
    return _KEYLIKE.sub("[REDACTED]", text)


#: the last word of a header name that makes it a credential, beside ``is_secret_field``'s
#: (``key``, ``token``, ``secret``, ``auth``, ``password``, ``authorization``, ``apikey``...)
_HEADER_WORDS = frozenset({"session", "cookie", "authentication", "jwt"})
#: ... or ends like these (``apikey``, ``csrftoken``, ``clientsecret``)
_HEADER_SUFFIXES = ("key", "token", "secret", "password")
#: ... unless the word before it says what kind of key: a retry's id, a handshake nonce, a cache entry
_NOT_CREDENTIAL_KINDS = frozenset({"idempotency", "websocket", "cache"})


@functools.lru_cache(maxsize=4096)  # on the event loop for every header of every request; names repeat
def is_secret_header(name: str) -> bool:
    """Whether a request header called ``name`` carries a credential, whatever its value looks
    like: the known ones (``SECRET_HEADERS``) and any whose name ends in a credential word
    (``x-portkey-api-key``, ``helicone-auth``, ``x-amz-security-token``, ``x-session``).
    Not a credential: what names one (``x-api-key-id``, ``session_id``), ``idempotency-key``,
    ``sec-websocket-key``, the SDKs' ``x-stainless-*`` and the rest (``anthropic-version``)."""
    n = name.lower().strip()
    if n in SECRET_HEADERS:
        return True
    words = [w for w in re.split(r"[-_.\s]+", n) if w]
    if not words or n.startswith("x-stainless-"):
        return False
    if len(words) > 1 and words[-2] in _NOT_CREDENTIAL_KINDS:
        return False
    last = words[-1]
    return (last in _HEADER_WORDS or is_secret_field(last) or last.endswith(_HEADER_SUFFIXES)
            or (last not in ("id", "ids") and is_secret_field(n)))


def secret_values(headers: list[tuple[str, str]]) -> list[str]:
    """The raw credential values of a request, for redaction (kept in memory only): every
    header ``is_secret_header`` names, the key after a scheme (``Bearer …``), each cookie's value."""
    out = []
    for n, v in headers:
        if not is_secret_header(n):
            continue
        out.append(v)
        _, _, rest = v.strip().partition(" ")
        if rest:
            out.append(rest)
        if v.lstrip().startswith(SIGV4):  # the access key id and the signature, wherever they reappear
            parts = sigv4_parts(v)
            out += [x for x in (parts.get("Credential", "").partition("/")[0], parts.get("Signature")) if x]
        if n.lower() in ("cookie", "set-cookie"):
            out += [c.partition("=")[2].strip() for c in v.split(";") if "=" in c]
    return out


_QUERY_SECRET_NAMES = frozenset({"key", "api_key", "api-key", "apikey", "token", "access_token", "auth", "sig", "signature", "code"})


def query_secrets(path: str) -> list[tuple[str, str]]:
    """Credential-looking query parameters of a path, e.g. Gemini's ``?key=AIza…``."""
    _, _, query = path.partition("?")
    out = []
    for part in query.split("&"):
        name, eq, value = part.partition("=")
        if eq and value and name.lower() in _QUERY_SECRET_NAMES:
            out.append((name, value))
    return out


def redact_path(path: str) -> str:
    """The path with credential query values (and key-like strings) replaced, for storage."""
    if "?" not in path:
        return path
    base, _, query = path.partition("?")
    parts = []
    for part in query.split("&"):
        name, eq, value = part.partition("=")
        if eq and value and name.lower() in _QUERY_SECRET_NAMES:
            part = f"{name}=[REDACTED]"
        parts.append(part)
    return redact_text(base + "?" + "&".join(parts))
