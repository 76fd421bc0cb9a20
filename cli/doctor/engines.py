"""`firsttoken doctor`, the model servers of the user's own (a loopback or LAN upstream: addon/engines/local.py):
does the engine answer, which is it, and which model has it loaded? Only the read-only GETs the engines
offer, each with doctor's short timeout, direct and without a key: llama.cpp ``/props`` (and ``/slots``),
Ollama ``/api/ps`` (and ``/api/tags``), the OpenAI-compatible ``/v1/models`` (LM Studio's: ``/api/v0/models``).
Never a POST, never a model call: a probe loads no model and takes no slot.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import PurePath
from typing import Any
from urllib.parse import urlsplit

from firsttoken.addon import routing
from firsttoken.addon.engines.local import is_local
from firsttoken.cli.doctor.core import BASE_URL_VARS, FAIL, PASS, WARN, Check, Context, same_endpoint
from firsttoken.cli.doctor.net import Net, describe_oserror
from firsttoken.cli.run.clients import copilot, ollama

SECTION = "engines"
#: what doctor reads of each engine, in words (said when none of them answered)
READS = "llama.cpp /props, Ollama /api/ps, /v1/models"
#: base URLs of the clients of local engines besides the SDKs': the ollama CLI and libraries (OLLAMA_HOST, read
#: by cli/run/clients/ollama.py's one rule), aider's Ollama models (litellm), Codex --oss, GitHub Copilot CLI's
#: bring-your-own-key provider
ENGINE_URL_VARS = ("OLLAMA_HOST", "OLLAMA_API_BASE", "CODEX_OSS_BASE_URL", "COPILOT_PROVIDER_BASE_URL")
#: where Ollama's clients go when OLLAMA_HOST is unset (said, and probed, only when something listens there)
OLLAMA_DEFAULT_SOURCE = "Ollama's default: OLLAMA_HOST is unset"


def engine_urls(env: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(variable, the URL its client goes to, the base-URL kind doctor checks it as) of each engine variable
    that is set: OLLAMA_HOST as the ollama clients read it (a bare ``host:port`` too), the others as written."""
    out = []
    for var in ENGINE_URL_VARS:
        value = (env.get(var) or "").strip()
        if not value:
            continue
        if var == ollama.VARIABLE:
            out.append((var, ollama.host_url(value), "ollama"))
        elif var == "OLLAMA_API_BASE":  # litellm appends /api/chat to the server's root
            out.append((var, value, "ollama"))
        elif var == copilot.VARIABLE:
            out.append((var, value, copilot.FAMILIES.get((env.get("COPILOT_PROVIDER_TYPE") or "").strip().lower()
                                                         or "openai", "openai")))
        else:
            out.append((var, value, "openai"))
    return out


def ollama_default(ctx: Context) -> str | None:
    """Ollama's default URL when OLLAMA_HOST is unset and something listens there (a TCP connect, nothing sent)
    that is not firsttoken itself; else None."""
    if (ctx.env.get(ollama.VARIABLE) or "").strip() or not ctx.network:
        return None
    if same_endpoint("127.0.0.1", ollama.DEFAULT_PORT, ctx):
        return None
    return ollama.DEFAULT if ctx.net.listening("127.0.0.1", ollama.DEFAULT_PORT) is None else None


def local_engines(ctx: Context) -> list[tuple[str, str]]:
    """(base URL, where it came from) of each upstream that is a model server of the user's own: the
    proxy's routes and --upstream, then the clients' base URLs that point at one directly (not at firsttoken);
    one per server (scheme, host and port), the first found. (No network: Ollama's default, probed when
    OLLAMA_HOST is unset and something listens there, is check_engines'.)"""
    found: dict[str, tuple[str, str]] = {}  # scheme://host:port -> (its URL, the source)
    routes = list(ctx.routes or [])
    try:
        routes += routing.parse_upstreams(list(ctx.upstreams))
    except routing.RouteError:
        pass
    for r in routes:
        if is_local(r.url):
            found.setdefault(_server(r.url), (r.url.rstrip("/"), f"route {r.name or 'default'!r}"))
    urls = [(var, (ctx.env.get(var) or "").strip()) for var in BASE_URL_VARS]
    urls += [(var, url) for var, url, _ in engine_urls(ctx.env)]
    for var, url in urls:
        url = url.rstrip("/")
        if "://" not in url or not is_local(url):
            continue
        u = urlsplit(url)
        try:
            port = u.port or (443 if u.scheme == "https" else 80)
        except ValueError:
            continue
        if not same_endpoint(u.hostname or "", port, ctx):
            found.setdefault(_server(url), (url, f"${var}"))
    return list(found.values())


def _server(url: str) -> str:
    u = urlsplit(url)
    return f"{u.scheme}://{u.netloc}".lower()


def _json(net: Net, url: str) -> tuple[int | None, Any, str]:
    """(status, the JSON body or None, the error in words): None status when nothing answered."""
    try:
        status, _ctype, body = net.get(url)
    except Exception as e:  # noqa: BLE001 - a probe never raises
        return None, None, describe_oserror(e)
    try:
        return status, json.loads(body), ""
    except ValueError:
        return status, None, f"HTTP {status}, not JSON"


def _some(names: list[str], n: int = 4) -> str:
    """The first ``n`` names, and how many more."""
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def _name(path: Any) -> str:
    """A model file's name (llama.cpp reports the path it was started with)."""
    return PurePath(str(path)).name if isinstance(path, str) and ("/" in path or "\\" in path) else str(path)


def _llama(net: Net, root: str, props: dict) -> tuple[str, str]:
    """What llama.cpp's /props (and /slots, when --slots is on) say: (the model, its slots and their context)."""
    gen = props.get("default_generation_settings") if isinstance(props.get("default_generation_settings"), dict) else {}
    n_ctx, slots = gen.get("n_ctx"), props.get("total_slots")
    model = _name(props.get("model_alias") or props.get("model_path") or "?")
    model += f" ({props['model_ftype']})" if props.get("model_ftype") else ""
    parts = []
    if isinstance(slots, int):
        per = f" of {n_ctx:,} tokens each" if isinstance(n_ctx, int) else ""
        parts.append(f"{slots} slot{'s' if slots != 1 else ''}{per} (--parallel {slots}"
                     + (f", --ctx-size {n_ctx * slots})" if isinstance(n_ctx, int) else ")"))
    status, doc, _ = _json(net, root + "/slots")
    if status == 200 and isinstance(doc, list):
        busy = sum(1 for s in doc if isinstance(s, dict) and s.get("is_processing"))
        parts.append(f"{busy} busy now")
    return model, "; ".join(parts)


def _ollama(net: Net, root: str, ps: dict) -> tuple[str, str, str, str | None]:
    """(status, what is loaded, the rest, a fix) from Ollama's /api/ps and /api/tags: the loaded models with
    their context and when they unload, the pulled ones."""
    loaded = [m for m in ps.get("models") or [] if isinstance(m, dict)]
    _, tags, _ = _json(net, root + "/api/tags")
    pulled = [str(m.get("name") or m.get("model")) for m in (tags or {}).get("models") or [] if isinstance(m, dict)] \
        if isinstance(tags, dict) else []
    have = f"pulled: {_some(pulled)}" if pulled else "no model pulled"
    if loaded:
        words = []
        for m in loaded:
            extra = [f"context {m['context_length']:,}" if isinstance(m.get("context_length"), int) else "",
                     _unloads(m.get("expires_at"))]
            extra = [x for x in extra if x]
            words.append(str(m.get("name") or m.get("model")) + (f" ({', '.join(extra)})" if extra else ""))
        return PASS, f"loaded: {', '.join(words)}", have, None
    if not pulled:
        return WARN, "no model loaded, none pulled", "a request for any model fails (model not found)", \
            "ollama pull MODEL (then name it in the client)"
    return PASS, "no model loaded", f"the next request loads one first (a cold start); {have}", None


def _unloads(expires_at: Any) -> str:
    """When Ollama unloads a model (its keep_alive), from now: "unloads in 4 min"."""
    try:  # Go writes up to nanoseconds; Python reads up to microseconds
        t = datetime.fromisoformat(re.sub(r"(\.\d{6})\d+", r"\1", str(expires_at)).replace("Z", "+00:00"))
        left = (t - datetime.now(UTC)).total_seconds()
    except (TypeError, ValueError):
        return ""
    if left > 10 * 365 * 86400:
        return "kept loaded (keep_alive -1)"
    return f"unloads in {left / 60:.0f} min" if left >= 60 else f"unloads in {max(left, 0):.0f} s"


def _models(doc: dict) -> str:
    """What /v1/models lists: the model ids, with vLLM's max_model_len or llama.cpp's n_ctx."""
    words = []
    for m in doc.get("data") or []:
        if not isinstance(m, dict):
            continue
        meta = m.get("meta") if isinstance(m.get("meta"), dict) else {}
        ctx = m.get("max_model_len") or meta.get("n_ctx")
        words.append(_name(m.get("id")) + (f" (context {ctx:,})" if isinstance(ctx, int) else ""))
    return _some(words) or "no model"


OPENAI_COMPATIBLE = "an OpenAI-compatible server"


def _engine_name(doc: dict) -> str:
    owners = {str(m.get("owned_by")) for m in doc.get("data") or [] if isinstance(m, dict)}
    return "vLLM" if "vllm" in owners else "llama.cpp llama-server" if "llamacpp" in owners else OPENAI_COMPATIBLE


def _lm_studio(cid: str, title: str, doc: dict) -> Check:
    """LM Studio's /api/v0/models: each downloaded model's ``state`` (loaded or not-loaded) and context."""
    models = [m for m in doc.get("data") or [] if isinstance(m, dict) and m.get("type", "llm") in ("llm", "vlm")]
    loaded = [m for m in models if m.get("state") == "loaded"]
    others = [str(m.get("id")) for m in models if m.get("state") != "loaded"]
    rest = f"downloaded: {_some(others, 3)}" if others else ""
    if not loaded:
        return Check(cid, SECTION, PASS if others else WARN, f"{title}: LM Studio answers, no model loaded",
                     (f"the next request loads one (a cold start); {rest}" if others else "no model downloaded"),
                     None if others else "lms get MODEL (or download one in LM Studio), then name it in the client")
    words = []
    for m in loaded:
        ctx = m.get("loaded_context_length") or m.get("max_context_length")
        words.append(str(m.get("id")) + (f" (context {ctx:,})" if isinstance(ctx, int) else ""))
    return Check(cid, SECTION, PASS, f"{title}: LM Studio answers, loaded: {_some(words)}", rest)


def start_fix(netloc: str, port: int | None) -> str:
    return (f"start the model server on {netloc} (llama-server --port {port}, `ollama serve`, vLLM, LM Studio's "
            "server), or fix the upstream's URL")


def probe_engine(net: Net, url: str, source: str) -> Check:
    """Which engine answers at ``url`` and what it has loaded, by its read-only GETs (first that answers)."""
    u = urlsplit(url)
    root = f"{u.scheme}://{u.netloc}"
    prefix = u.path.rstrip("/")
    models_url = root + (prefix if routing.has_version(prefix) else prefix + "/v1") + "/models"
    cid, title = f"engine.{u.netloc}", f"{root} ({source})"
    seen: list[str] = []
    status, doc, err = _json(net, root + "/props")
    if status is None:  # nothing answered at all: no point asking the other paths
        fix = start_fix(u.netloc, u.port) if err != "timed out" else (
            f"something accepts connections on {u.netloc} but sends no HTTP answer: a server still starting or "
            "loading its model answers once it is up (its log says), a stuck one needs a restart; or this port is "
            "not the model server's")
        return Check(cid, SECTION, FAIL, f"{title}: the engine does not answer ({err})",
                     f"a GET {root}/props got no HTTP answer: every request through firsttoken to it fails the same way",
                     fix)
    seen.append(f"/props {status if status is not None else err}")
    if status == 200 and isinstance(doc, dict) and ("model_path" in doc or "total_slots" in doc):
        loaded, slots = _llama(net, root, doc)
        return Check(cid, SECTION, PASS, f"{title}: llama.cpp llama-server answers, model {loaded}", slots)
    status, doc, err = _json(net, root + "/api/ps")
    seen.append(f"/api/ps {status if status is not None else err}")
    if status == 200 and isinstance(doc, dict) and isinstance(doc.get("models"), list):
        st, loaded, detail, fix = _ollama(net, root, doc)
        return Check(cid, SECTION, st, f"{title}: Ollama answers, {loaded}", detail, fix)
    status, doc, err = _json(net, models_url)
    seen.append(f"{urlsplit(models_url).path} {status if status is not None else err}")
    if status == 200 and isinstance(doc, dict) and isinstance(doc.get("data"), list):
        name = _engine_name(doc)
        if name == OPENAI_COMPATIBLE:  # LM Studio's /v1/models lists what is downloaded: its own API says what is loaded
            status, lms, _ = _json(net, root + "/api/v0/models")
            if status == 200 and isinstance(lms, dict) and any(isinstance(m, dict) and "state" in m
                                                               for m in lms.get("data") or []):
                return _lm_studio(cid, title, lms)
        return Check(cid, SECTION, PASS, f"{title}: {name} answers, serving {_models(doc)}")
    if status in (401, 403):
        return Check(cid, SECTION, WARN, f"{title}: the engine answers, but its model list wants a key (HTTP {status})",
                     "doctor sends no key, so which model it serves is not known",
                     "nothing to fix if your client has the key (vLLM and llama-server: --api-key); "
                     f"`curl -H \"Authorization: Bearer $KEY\" {models_url}` lists them")
    return Check(cid, SECTION, WARN, f"{title}: it answers HTTP, but none of the engines' read-only endpoints",
                 f"{'; '.join(seen)} (doctor reads {READS})",
                 f"check that {root} is the model server's address and port (Ollama: 11434, llama-server: 8080, "
                 "vLLM: 8000, LM Studio: 1234), and that its path is the API's")


def check_engines(ctx: Context, earlier: Sequence[Check] = ()) -> list[Check]:
    """Each local engine's probe. One that ``earlier`` checks already found unreachable (an upstream's DNS or
    TCP, a base URL where nothing listens) is not asked again: that check gets the engine's fix (start it),
    one failure for one cause."""
    out = []
    failed = {c.id: c for c in earlier if c.status == FAIL}
    engines = local_engines(ctx)
    default = ollama_default(ctx)  # OLLAMA_HOST unset and something listens on Ollama's port
    if default and all(_server(url) != _server(default) for url, _ in engines):
        engines.append((default, OLLAMA_DEFAULT_SOURCE))
    for url, source in engines:
        u = urlsplit(url)
        port = u.port or (443 if u.scheme == "https" else 80)
        down = failed.get(f"upstream.{u.hostname}:{port}")
        if down is not None and ("TCP connect" in down.title or "DNS" in down.title):
            down.fix = start_fix(u.netloc, port)
            continue
        down = failed.get(f"base_url.environment.{source[1:]}")
        if down is not None and "nothing listens" in down.title:
            down.fix = f"{down.fix}; a model server of your own: {start_fix(u.netloc, port)}"
            continue
        out.append(probe_engine(ctx.net, url, source))
    return out
