"""The house rules, checked: packages by concept, public names only, short module docstrings, a
wheel that holds every module, and a database of the first schema that upgrades to the current one."""

from __future__ import annotations

import ast
import collections
import pathlib
import sqlite3
import subprocess
import sys
import zipfile

import pytest

from firsttoken.addon.record import FIELDS, Record
from firsttoken.addon.store import queries
from firsttoken.addon.store.migrations import MIGRATIONS, migrate
from firsttoken.addon.store.writer import Writer

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = {"addon": "firsttoken.addon", "cli": "firsttoken.cli"}


def modules() -> dict[str, pathlib.Path]:
    """Every module of the project by dotted name (packages by their __init__)."""
    out = {}
    for root, pkg in PACKAGES.items():
        for p in sorted((ROOT / root).rglob("*.py")):
            rel = p.relative_to(ROOT / root).with_suffix("").parts
            if rel[-1] == "__init__":
                rel = rel[:-1]
            out[".".join((pkg, *rel))] = p
    return out


def test_every_folder_with_modules_is_a_package():
    for root in PACKAGES:
        for d in sorted({p.parent for p in (ROOT / root).rglob("*.py")}):
            assert (d / "__init__.py").exists(), f"{d.relative_to(ROOT)} has modules but no __init__.py"


def test_no_module_imports_a_private_name_from_another():
    bad = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("firsttoken"):
                bad += [f"{name}: from {node.module} import {a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
            if isinstance(node, ast.ImportFrom) and node.level:
                bad.append(f"{name}: relative import (use absolute imports)")
    assert not bad, "\n".join(bad)


def module_imports(tree: ast.Module, known: dict[str, pathlib.Path]) -> set[str]:
    """The project modules a module imports, wherever the import stands: its top level, `if` blocks
    such as TYPE_CHECKING, and inside functions too (an import moved into a function to dodge a
    circle is still the circle). ``from pkg import sub`` is an edge to the submodule ``pkg.sub``;
    ``from pkg import NAME`` is an edge to the package's facade (its ``__init__``)."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("firsttoken"):
            out.update(f"{n.module}.{a.name}" if f"{n.module}.{a.name}" in known else n.module for a in n.names)
        elif isinstance(n, ast.Import):
            out.update(a.name for a in n.names if a.name.startswith("firsttoken"))
    return out


def import_circles(graph: dict[str, set[str]]) -> list[str]:
    """One line per circle: each module on it, and a path that leads from it back to itself."""
    circles = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    circles.append(" -> ".join([*trail, start]))
                    stack.clear()
                    break
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    return circles


def test_no_import_circles_between_modules():
    """Two modules that import each other (even only for type hints, even inside a function) are one
    concept split in two, or a missing interface. A package's facade (its ``__init__``) importing its
    own modules is one way; a module that imports names back from its package's facade, or a facade
    reached through another module, closes a circle and is caught."""
    known = modules()
    graph = {name: {m for m in module_imports(ast.parse(path.read_text()), known) if m in known and m != name}
             for name, path in known.items()}
    circles = import_circles(graph)
    assert not circles, "\n".join(circles)


def test_circle_check_sees_lazy_and_facade_imports():
    """The check itself: a function-level import and an import through a package's facade are edges."""
    known = {"firsttoken.p": ROOT, "firsttoken.p.a": ROOT, "firsttoken.p.b": ROOT, "firsttoken.q": ROOT}
    lazy = ast.parse("def f():\n    from firsttoken.q import X\n")
    facade = ast.parse("from firsttoken.p import NAME, b\n")
    assert module_imports(lazy, known) == {"firsttoken.q"}
    assert module_imports(facade, known) == {"firsttoken.p", "firsttoken.p.b"}
    back = module_imports(ast.parse("def f():\n    from firsttoken.p import NAME\n"), known)
    graph = {"firsttoken.p": {"firsttoken.p.a"}, "firsttoken.p.a": {"firsttoken.q"}, "firsttoken.p.b": set(),
             "firsttoken.q": back}
    assert import_circles(graph) == ["firsttoken.p -> firsttoken.p.a -> firsttoken.q -> firsttoken.p",
                                     "firsttoken.p.a -> firsttoken.q -> firsttoken.p -> firsttoken.p.a",
                                     "firsttoken.q -> firsttoken.p -> firsttoken.p.a -> firsttoken.q"]
    assert not import_circles({"firsttoken.p": {"firsttoken.p.a"}, "firsttoken.p.a": set()})


def test_tests_import_public_names_only():
    bad = []
    for path in sorted((ROOT / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("firsttoken"):
                bad += [f"{path.name}: from {node.module} import {a.name}" for a in node.names if a.name.startswith("_")]
    assert not bad, "\n".join(bad)


def test_init_files_export_public_names_only():
    for name, path in modules().items():
        if path.name != "__init__.py":
            continue
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                assert not [a.name for a in node.names if a.name.startswith("_")], f"{name} re-exports a private name"
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                names = ast.literal_eval(node.value)
                assert not [n for n in names if n.startswith("_")], f"{name}.__all__ lists a private name"


def test_no_prefix_family_outside_a_package():
    """Three or more `thing_*.py` files side by side are a package in disguise. The API parsers
    are named after the `api` value they parse (openai_chat.py parses "openai.chat")."""
    from firsttoken.addon.apis import INTERPRETERS

    api_modules = {api.replace(".", "_") for api in INTERPRETERS}
    for root in PACKAGES:
        for d in sorted({p.parent for p in (ROOT / root).rglob("*.py")}):
            stems = [p.stem for p in d.glob("*.py") if "_" in p.stem.strip("_") and p.stem not in api_modules]
            families = collections.Counter(s.split("_", 1)[0] for s in stems)
            crowded = {k: n for k, n in families.items() if n >= 3}
            assert not crowded, f"{d.relative_to(ROOT)}: prefix families {crowded}: make each a package"



def test_every_module_has_a_short_docstring():
    """What the module is for, in at most five lines, and where it is explained: the explanation
    itself lives in docs/*.md (or a comment on the line it explains), where it is read and kept."""
    bad = []
    for path in modules().values():
        rel = path.relative_to(ROOT).as_posix()
        doc = ast.get_docstring(ast.parse(path.read_text()))
        lines = [line for line in (doc or "").splitlines() if line.strip()]
        if not lines:
            bad.append(f"{rel}: no module docstring")
        elif len(lines) > 5:
            bad.append(f"{rel}: {len(lines)} lines of module docstring (at most 5; move the rest to docs/)")
    assert not bad, "\n".join(bad)

def test_built_wheel_holds_every_module(tmp_path):
    """A new subpackage must not import fine in the editable install and be missing from the wheel."""
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    (wheel,) = tmp_path.glob("firsttoken-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = []
    for name, path in modules().items():
        inside = name.replace(".", "/") + ("/__init__.py" if path.name == "__init__.py" else ".py")
        if inside not in names:
            missing.append(inside)
    assert not missing, f"missing from the wheel: {missing}"
    assert not [n for n in names if n.startswith(("tests/", "addon/", "cli/"))], "files outside firsttoken/ in the wheel"
    # the user docs travel with the code: messages point at `firsttoken docs TOPIC`
    from firsttoken.cli.docs import TOPICS

    assert {f"firsttoken/docs/{f}" for f, _ in TOPICS.values()} <= names


@pytest.mark.slow
def test_an_editable_install_prints_no_warning(tmp_path):
    """`pip install -q -e .` (README's and CONTRIBUTING's way in) prints nothing: setuptools' warning about a
    folder named like the package is silenced in setup.py because no such folder exists; if one ever
    does, this fails too."""
    assert not (ROOT / "firsttoken").exists(), "a folder named firsttoken would shadow the package"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    # as README does: the newest pip first (an old one hides the build backend's warnings)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-U", "pip"], check=True, timeout=300)
    res = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                          "--disable-pip-version-check", "-e", str(ROOT)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    said = [ln for ln in (res.stdout + res.stderr).splitlines()
            if "Warning" in ln or "warning" in ln.lower() and "is ignored" not in ln]
    assert not said, res.stdout + res.stderr


# -- the schema: llm's upgrade-from-oldest test --------------------------------------------------

def first_schema(path: pathlib.Path) -> sqlite3.Connection:
    """A database exactly as the first release created it: only the first migration applied."""
    import sqlite_utils

    db = sqlite_utils.Database(str(path))
    db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    MIGRATIONS[0](db)
    db.execute("INSERT INTO _migrations VALUES (?, ?)", [MIGRATIONS[0].__name__, "2026-01-01T00:00:00+00:00"])
    db.execute(
        "INSERT INTO requests (id, started_at, state, phase, route, api, model, stream, status, ttfb_ms, ttft_ms, gap_ms,"
        " total_ms, findings, top_code, top_severity) VALUES ('old1', '2026-01-01T00:00:00.000+00:00', 'done', 'done',"
        " 'default', 'openai.chat', 'gpt-4o-mini', 1, 401, 80.5, NULL, NULL, 90.0,"
        " '[{\"code\": \"auth.rejected\", \"severity\": \"error\", \"message\": \"m\", \"hint\": \"h\", \"params\": {}}]',"
        " 'auth.rejected', 'error')")
    db.conn.commit()
    return db.conn


def test_a_database_of_the_first_schema_upgrades_to_the_current_one(tmp_path):
    import sqlite_utils

    path = tmp_path / "old.db"
    first_schema(path).close()
    db = sqlite_utils.Database(str(path))
    applied = migrate(db)
    assert applied == [fn.__name__ for fn in MIGRATIONS[1:]]
    assert set(FIELDS) <= set(db["requests"].columns_dict)
    db.conn.close()

    # the old row reads through today's queries, and today's writer adds rows beside it
    w = Writer(str(path))
    rec = Record(id="new1", started_at="2026-02-01T00:00:00.000+00:00", state="done", phase="done", status=200,
                 model="gpt-4o-mini", api="openai.chat", ttfb_ms=50.0, ttft_ms=120.0, gap_ms=70.0)
    w.put(rec.row())
    w.close()
    conn = sqlite_utils.Database(str(path))
    rows = {r["id"]: r for r in queries.recent(conn, queries.Filters(), limit=None)}
    assert set(rows) == {"old1", "new1"}
    assert rows["old1"]["status"] == 401 and rows["old1"]["ttfb_ms"] == 80.5
    assert rows["new1"]["ttft_ms"] == 120.0


@pytest.mark.parametrize("n", range(1, len(MIGRATIONS)))
def test_every_intermediate_schema_upgrades(tmp_path, n):
    """A database made by any release in between (the first n migrations) upgrades too."""
    import sqlite_utils

    db = sqlite_utils.Database(str(tmp_path / "mid.db"))
    db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    for fn in MIGRATIONS[:n]:
        fn(db)
        db.execute("INSERT INTO _migrations VALUES (?, ?)", [fn.__name__, "2026-01-01"])
    assert migrate(db) == [fn.__name__ for fn in MIGRATIONS[n:]]
    assert set(FIELDS) <= set(db["requests"].columns_dict)


def test_the_error_rule_in_sql_stats_and_python_agree(tmp_path):
    """Every combination of the columns the rule reads: the SQL rule (0 or 1, never NULL from SQL's
    three-valued logic), ``is_error`` and `stats` (on either source of rows) count the same requests."""
    import itertools
    import uuid

    from firsttoken.addon.store import stats_queries as sq
    from firsttoken.addon.store.db import open_db

    db = open_db(tmp_path / "rule.db")
    combos = list(itertools.product(("done", "in_flight"), (None, 200, 404, 503), (None, "boom"), (None, "warn", "error"),
                                    (0, 1)))
    for state, status, error, sev, aborted in combos:
        db.conn.execute("INSERT INTO requests (id, started_at, state, status, error, top_severity, client_aborted) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)", [uuid.uuid4().hex, "2026-12-01T00:00:00", state, status, error,
                                                          sev, aborted])
    db.conn.commit()
    rows = [dict(zip(("state", "status", "error", "top_severity", "client_aborted", "e"), r)) for r in db.conn.execute(
        f"SELECT state, status, error, top_severity, client_aborted, {queries.ERROR} FROM requests")]
    assert len(rows) == len(combos) and all(r["e"] in (0, 1) for r in rows)
    assert all(bool(r["e"]) == queries.is_error(r) for r in rows)
    for general in (False, True):
        res = sq.compute(db, force_general=general)
        assert res["indexed"] is not general
        assert sum(g["errors"] for g in res["groups"]) == sum(r["e"] for r in rows) > 0
    aborted_only = [r for r in rows if r["client_aborted"] and r["state"] == "done" and r["status"] in (None, 200)
                    and r["top_severity"] != "error"]
    assert aborted_only and not any(r["e"] for r in aborted_only)  # a hang-up is not a failed request


def test_the_error_rule_has_one_home(tmp_path):
    """``queries.error_sql`` is the rule: a current database holds no copy of it (m022 dropped the
    running totals' triggers and the errors index that held it as m013 froze it)."""
    from firsttoken.addon.store.db import open_db

    db = open_db(tmp_path / "home.db")
    schema = db.conn.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL").fetchall()
    assert any(kind == "index" for kind, _, _ in schema) and not any(kind == "trigger" for kind, _, _ in schema)
    assert not [name for kind, name, sql in schema if kind != "table" and "top_severity" in sql]
