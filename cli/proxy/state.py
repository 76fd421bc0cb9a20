"""The state file a running proxy writes: ``<db dir>/proxy.json``.

`firsttoken proxy` records itself there once it listens (:func:`write_state`) and removes
itself on exit (:func:`clear_state`); `firsttoken env` and `firsttoken doctor` read it
(:func:`read_states`) to find the running proxies, their address and their routes.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

from firsttoken.addon import routing
from firsttoken.addon.routing import Route
from firsttoken.addon.store.db import FILE_MODE, private_dir
from firsttoken.cli.options import resolve_db

STATE_FILE = "proxy.json"


def state_path(db_path: str | os.PathLike | None = None) -> Path:
    """``proxy.json`` next to the database (the default one unless ``db_path``)."""
    return Path(resolve_db(str(db_path) if db_path else None)).expanduser().parent / STATE_FILE


def write_state(server: Any, db_path: str | os.PathLike | None = None) -> Path | None:
    """Record a started ProxyServer (url, routes, mode) so `firsttoken env` / `doctor` find it.

    Call once the proxy listens (``on_ready``); :func:`clear_state` on exit. Never raises."""
    try:
        path = state_path(db_path or server.db)
        entry = {
            "pid": os.getpid(),
            "url": server.url,
            "port": server.bound_port,
            "host": server.host,
            "db": str(server.db),
            "forward": bool(getattr(server, "forward_mode", False)),
            "confdir": (getattr(server, "options", {}) or {}).get("confdir"),
            "metrics_url": getattr(server, "metrics_url", None),
            "routes": [_route_spec(r) for r in server.routes],
            "started_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "store": _store_health(server),  # database writes failing? (`doctor` says so)
        }
        proxies = [p for p in _load(path) if p.get("port") != entry["port"] and _alive(p)]
        _save(path, proxies + [entry])
        return path
    except Exception:  # noqa: BLE001 - a state file is a convenience, never a reason to fail
        return None


def clear_state(server: Any, db_path: str | os.PathLike | None = None) -> None:
    try:
        path = state_path(db_path or server.db)
        proxies = [p for p in _load(path) if p.get("port") != server.bound_port and _alive(p)]
        if proxies:
            _save(path, proxies)
        else:
            path.unlink(missing_ok=True)
    except Exception:  # noqa: BLE001
        pass


def read_states(db_path: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """Running proxies from the state file, newest last (stale entries dropped)."""
    try:
        return [p for p in _load(state_path(db_path)) if _alive(p)]
    except Exception:  # noqa: BLE001
        return []


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


def _route_spec(r: Route) -> str:
    return f"{r.name}={r.url}" if r.name else r.url


def _load(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    doc = json.loads(path.read_text(encoding="utf-8"))
    return [p for p in doc.get("proxies", []) if isinstance(p, dict)]


def _save(path: Path, proxies: list[dict[str, Any]]) -> None:
    private_dir(path.parent)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    # owner only, whatever the umask: it names the proxy's routes and its database
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps({"version": 1, "proxies": proxies}, indent=2))
    os.chmod(tmp, FILE_MODE)
    os.replace(tmp, path)


def _alive(p: dict[str, Any]) -> bool:
    pid = p.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    if os.name == "nt":
        return True  # no cheap check; the port test in doctor tells the rest
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
