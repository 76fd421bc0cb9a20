"""The per-user registry of running proxies: ``<state dir>/proxies/<pid>-<port>.json``.

`firsttoken proxy` registers once it listens and removes its entry on exit; `env`, `doctor`, `run`
and `live` read it, so a proxy writing any database is found. Owner-only files; entries of dead
processes are dropped when read. See docs/clients.md (where the proxy's routes come from).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

from firsttoken.addon import routing
from firsttoken.addon.routing import Route
from firsttoken.addon.store.db import DIR_MODE, FILE_MODE, pid_alive, private_dir

STATE_DIR_ENV = "FIRSTTOKEN_STATE_DIR"


def registry_dir() -> Path:
    """The folder holding one entry per running proxy of this user."""
    env = os.environ.get(STATE_DIR_ENV)
    if env:
        base = Path(env).expanduser()
    else:
        import platformdirs

        base = Path(platformdirs.user_state_dir("firsttoken", appauthor=False))
    return base / "proxies"


def state_path(server: Any) -> Path:
    """The registry entry of a started ProxyServer (this process, its port)."""
    return registry_dir() / f"{os.getpid()}-{int(server.bound_port or 0)}.json"


def write_state(server: Any) -> Path | None:
    """Register a started ProxyServer (url, routes, mode, database) so other commands find it.

    Call once the proxy listens (``on_listen``), again to refresh its store health;
    :func:`clear_state` on exit. Never raises."""
    try:
        entry = {
            "pid": os.getpid(),
            "url": server.url,
            "port": server.bound_port,
            "host": server.host,
            "db": os.path.realpath(str(server.db)),
            "forward": bool(getattr(server, "forward_mode", False)),
            "confdir": (getattr(server, "options", {}) or {}).get("confdir"),
            "metrics_url": getattr(server, "metrics_url", None),
            "routes": [_route_spec(r) for r in server.routes],
            "started_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds"),
            "store": _store_health(server),  # database writes failing? (`doctor` says so)
            "live": _live_feed(server),  # where `firsttoken live` reads what this proxy knows (its port, a token)
        }
        path = state_path(server)
        if path.exists():  # a refresh keeps the start time
            old = _load(path)
            entry["started_at"] = (old or {}).get("started_at") or entry["started_at"]
        _save(path, entry)
        return path
    except Exception:  # noqa: BLE001 - the registry is a convenience, never a reason to fail
        return None


def clear_state(server: Any) -> None:
    try:
        state_path(server).unlink(missing_ok=True)
    except Exception:  # noqa: BLE001
        pass


def read_states(db_path: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """Running proxies, oldest first; with ``db_path``, those writing that database come last
    (the one a command picks is ``[-1]``). Entries of dead processes are dropped (and removed)."""
    try:
        d = registry_dir()
        paths = sorted(d.glob("*.json")) if d.is_dir() else []
    except OSError:
        return []
    states = []
    for path in paths:
        st = _load(path)
        if st is None:
            continue
        if not _alive(st):
            try:
                path.unlink(missing_ok=True)
            except OSError:
                pass
            continue
        states.append(st)
    states.sort(key=lambda st: str(st.get("started_at") or ""))
    if db_path:
        want = os.path.realpath(os.path.expanduser(str(db_path)))
        states.sort(key=lambda st: os.path.realpath(str(st.get("db") or "")) == want)  # stable
    return states


def proxy_for_db(db_path: str | os.PathLike) -> dict[str, Any] | None:
    """The running proxy writing ``db_path`` (the newest), or None when none does."""
    want = os.path.realpath(os.path.expanduser(str(db_path)))
    mine = [st for st in read_states() if os.path.realpath(str(st.get("db") or "")) == want]
    return mine[-1] if mine else None


def state_routes(state: dict[str, Any]) -> list[Route] | None:
    """The routes a state entry records (None: they do not parse)."""
    try:
        return routing.parse_upstreams(state.get("routes") or [])
    except routing.RouteError:
        return None


def _store_health(server: Any) -> dict[str, Any] | None:
    capture = getattr(server, "capture", None)
    fn = getattr(capture, "store_health", None)
    return fn() if callable(fn) else None


def _live_feed(server: Any) -> dict[str, Any] | None:
    feed = getattr(server, "live_feed", None)
    return feed.entry() if feed is not None else None


def _route_spec(r: Route) -> str:
    return f"{r.name}={r.url}" if r.name else r.url


def demo_record() -> Path:
    """Where `firsttoken demo` notes the database it recorded into (beside the registry)."""
    return registry_dir().parent / "demo" / "last.json"


def remember_demo(db: str | os.PathLike) -> None:
    """Note the database a demo recorded into, for the reading commands (``options.reading_db``).
    Never raises: a demo whose note cannot be written still ran."""
    try:
        _save(demo_record(), {"db": os.path.realpath(str(db)),
                              "at": _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")})
    except OSError:
        pass


def recorded_demo() -> str | None:
    """The database the latest demo recorded into (None: no demo yet, or its note is unreadable)."""
    doc = _load(demo_record())
    return doc.get("db") if doc and isinstance(doc.get("db"), str) else None


def _load(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # half-written by a crashed proxy, or not ours
    return doc if isinstance(doc, dict) else None


def _save(path: Path, entry: dict[str, Any]) -> None:
    private_dir(path.parent)
    if os.name != "nt":
        try:
            os.chmod(path.parent, DIR_MODE)  # firsttoken's own folder: owner only, even if made looser
        except OSError:
            pass
    tmp = path.with_suffix(".tmp")
    # owner only, whatever the umask: it names the proxy's routes and its database
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps(entry, indent=2))
    os.chmod(tmp, FILE_MODE)
    os.replace(tmp, path)


def _alive(p: dict[str, Any]) -> bool:
    return pid_alive(p.get("pid"))
