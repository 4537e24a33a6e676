"""Generate ``src/mindstore/sync.pyi``: the typed face of :mod:`mindstore.sync`.

``mindstore.sync`` builds its methods at import time from the async classes (one
implementation, no drift), which type checkers cannot see. This script writes the stub they
read instead, from the same source of truth: for every method the runtime twins
(``mindstore.sync._twin``) it takes the async method's signature and annotations, drops
``async`` (a coroutine's result is returned plainly), renames ``aclose`` to ``close``, and
swaps the async classes in annotations for their sync twins (``Session`` → the sync
``Session``, ``Store`` → ``SQLiteStore | PostgresStore``). Every other public name of
:mod:`mindstore` is re-exported, as ``mindstore.sync.__getattr__`` does at run time.

    python scripts/gen_sync_stub.py           # rewrite the stub
    python scripts/gen_sync_stub.py --check   # exit 1 when the checked-in stub is stale

``tests/meta/test_sync_stub.py`` runs the check, so a change to an async signature that is not
regenerated fails the suite.
"""

from __future__ import annotations

import argparse
import builtins
import inspect
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STUB = ROOT / "src" / "mindstore" / "sync.pyi"

# a quoted literal (kept as it is) or a dotted name
_IDENT = re.compile(r"'[^']*'|\"[^\"]*\"|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_KEYWORDS = {"None", "True", "False"}
# Names of the async world → their sync twins in the stub (which defines these classes).
_TWIN_NAMES = {
    "Session": "Session",
    "SessionManager": "SessionManager",
    "ToolSet": "ToolSet",
    "SQLiteStore": "SQLiteStore",
    "PostgresStore": "PostgresStore",
    "Store": "SQLiteStore | PostgresStore",
}
SYNC_STORE = "SQLiteStore | PostgresStore"


class Imports:
    """The ``from X import Y`` lines the annotations need, resolved to where Y is defined
    (``--strict`` forbids implicit re-exports)."""

    def __init__(self) -> None:
        # local name -> (module, attribute); what the hand-written parts of the stub use
        self.names: dict[str, tuple[str, str]] = {
            "Any": ("typing", "Any"),
            "NoReturn": ("typing", "NoReturn"),
            "Self": ("typing", "Self"),
            "Callable": ("collections.abc", "Callable"),
            "Iterator": ("collections.abc", "Iterator"),
            "Mapping": ("collections.abc", "Mapping"),
            "TracebackType": ("types", "TracebackType"),
            "Store": ("mindstore.store.base", "Store"),
            "Change": ("mindstore.changes", "Change"),
            "Tool": ("mindstore.tools", "Tool"),
            "_AsyncStoreSearchProvider": ("mindstore.context", "StoreSearchProvider"),
            "_AsyncStoreSkillProvider": ("mindstore.context", "StoreSkillProvider"),
        }
        self.modules: set[str] = {"concurrent.futures"}
        self.reexported: set[str] = set()

    def need(self, name: str, home: types.ModuleType) -> None:
        head = name.split(".")[0]
        if head in _KEYWORDS or head in _TWIN_NAMES or head in self.names:
            return
        if head in vars(builtins) and head not in vars(home):
            return
        value = vars(home).get(head, _MISSING)
        if value is _MISSING:  # imported under TYPE_CHECKING only
            self.names[head] = (_defining_module(head, None, home), head)
            return
        if isinstance(value, types.ModuleType):
            if value.__name__ != head:
                raise LookupError(f"module alias {head!r} in {home.__name__} is not supported")
            self.modules.add(head)
            return
        self.names[head] = (_origin(head, value, home), head)

    def lines(self) -> list[str]:
        out = [f"import {m}" for m in sorted(self.modules)]
        by_module: dict[str, list[str]] = {}
        for local, (module, attr) in self.names.items():
            alias = local if local != attr or local in self.reexported else None
            by_module.setdefault(module, []).append(f"{attr} as {alias}" if alias else attr)
        for module in sorted(by_module):
            out.append(f"from {module} import {', '.join(sorted(by_module[module]))}")
        return out


_MISSING = object()


def _origin(name: str, value: Any, home: types.ModuleType) -> str:
    """The module that defines ``name`` (``value``), importable with that name."""
    for library in ("typing", "collections.abc"):
        if getattr(sys.modules[library], name, _MISSING) is value:
            return library
    module_name = getattr(value, "__module__", None)
    if (
        isinstance(module_name, str)
        and getattr(value, "__qualname__", None) == name
        and getattr(sys.modules.get(module_name), name, _MISSING) is value
    ):
        return module_name
    return _defining_module(name, value, home)


def _defining_module(name: str, value: Any, home: types.ModuleType) -> str:
    """The mindstore module whose source defines ``name`` at top level (an assignment, a class
    or a function) — for type aliases and names only imported under ``TYPE_CHECKING``."""
    definition = re.compile(
        rf"^(?:{re.escape(name)}\s*(?::[^=\n]*)?=|(?:class|def) {re.escape(name)}\b)", re.M
    )
    for module_name, module in sorted(sys.modules.items()):
        if not module_name.startswith("mindstore") or name not in vars(module):
            continue
        if value is not None and vars(module)[name] is not value:
            continue
        try:
            source = inspect.getsource(module)
        except (OSError, TypeError):
            continue
        if definition.search(source):
            return module_name
    raise LookupError(f"{home.__name__}: cannot find where {name!r} is defined")


def _annotation(text: Any, home: types.ModuleType, imports: Imports, shadowed: set[str]) -> str:
    if text is inspect.Parameter.empty:
        return ""
    if not isinstance(text, str):
        raise TypeError(f"{home.__name__}: expected a string annotation, got {text!r}")

    def swap(match: re.Match[str]) -> str:
        word = match.group(0)
        if word[0] in "'\"":
            return word
        head = word.split(".")[0]
        if word in _TWIN_NAMES:
            return _TWIN_NAMES[word]
        imports.need(word, home)
        if head in shadowed and head in vars(builtins):
            return f"builtins.{word}"  # a method of the class has that name (list, type…)
        return word

    out = _IDENT.sub(swap, text)
    if "builtins." in out:
        imports.modules.add("builtins")
    return out


def _params(
    sig: inspect.Signature,
    home: types.ModuleType,
    imports: Imports,
    shadowed: set[str],
    *,
    first: str | None,
    replace: dict[str, str] | None = None,
) -> str:
    parts: list[str] = [first] if first else []
    previous: Any = None
    params = list(sig.parameters.values())
    if first and params and params[0].name in ("self", "cls"):
        params = params[1:]
    for p in params:
        kind = p.kind
        if previous is inspect.Parameter.POSITIONAL_ONLY and kind is not previous:
            parts.append("/")
        if kind is inspect.Parameter.KEYWORD_ONLY and previous not in (
            inspect.Parameter.KEYWORD_ONLY,
            inspect.Parameter.VAR_POSITIONAL,
        ):
            parts.append("*")
        star = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(kind.name, "")
        ann = (replace or {}).get(p.name) or _annotation(p.annotation, home, imports, shadowed)
        text = f"{star}{p.name}" + (f": {ann}" if ann else "")
        if p.default is not inspect.Parameter.empty:
            text += " = ..." if ann else "=..."
        parts.append(text)
        previous = kind
    if previous is inspect.Parameter.POSITIONAL_ONLY:
        parts.append("/")
    return ", ".join(parts)


def _returns(
    sig: inspect.Signature, home: types.ModuleType, imports: Imports, shadowed: set[str]
) -> str:
    ann = _annotation(sig.return_annotation, home, imports, shadowed)
    return f" -> {ann or 'Any'}"


def _members(sync_class: Any, aio_class: type) -> list[str]:
    """Stub lines of the members ``mindstore.sync._twin`` generated on ``sync_class``."""
    shadowed = {n for n, _ in inspect.getmembers(aio_class)}
    lines: list[str] = []
    for target, name in sync_class._twinned:
        static = inspect.getattr_static(aio_class, name)
        if isinstance(static, property):
            assert static.fget is not None
            sig = inspect.signature(static.fget)
            home = sys.modules[static.fget.__module__]
            returns = _returns(sig, home, IMPORTS, shadowed)
            lines += ["    @property", f"    def {target}(self){returns}: ..."]
        else:
            member = getattr(aio_class, name)
            sig = inspect.signature(member)
            home = sys.modules[member.__module__]
            params = _params(sig, home, IMPORTS, shadowed, first="self")
            returns = _returns(sig, home, IMPORTS, shadowed)
            lines.append(f"    def {target}({params}){returns}: ...")
    return lines


IMPORTS = Imports()


def _constructor(
    fn: Any,
    *,
    name: str = "__init__",
    first: str = "self",
    returns: str = "None",
    replace: dict[str, str] | None = None,
    decorator: str | None = None,
) -> list[str]:
    sig = inspect.signature(fn)
    home = sys.modules[fn.__module__]
    params = _params(sig, home, IMPORTS, set(), first=first, replace=replace)
    head = [f"    {decorator}"] if decorator else []
    return [*head, f"    def {name}({params}) -> {returns}: ..."]


def render() -> str:
    """The stub's text."""
    import mindstore
    from mindstore import sync
    from mindstore.manager import SessionManager as AsyncManager
    from mindstore.session import Session as AsyncSession
    from mindstore.store import open_store as async_open_store
    from mindstore.store.postgres import PostgresStore as AsyncPostgres
    from mindstore.store.sqlite import SQLiteStore as AsyncSQLite
    from mindstore.tools import ToolSet as AsyncToolSet

    global IMPORTS
    IMPORTS = Imports()
    store_arg = {"store": SYNC_STORE}
    body: list[str] = []
    body += [
        "class Loop:",
        "    def __init__(self) -> None: ...",
        "    def call(self, fn: Callable[..., Any], /, *args: Any) -> Any: ...",
        "    def submit(self, fn: Callable[..., Any], /, *args: Any)"
        " -> concurrent.futures.Future[Any]: ...",
        "    def in_thread(self) -> bool: ...",
        "    def stop(self) -> None: ...",
        "",
        "class _Twin:",
        "    _aio: Any",
        "    _loop: Loop",
        "    @property",
        "    def aio(self) -> Any: ...",
        "",
        "class ChangeIterator(Iterator[Change]):",
        "    def __iter__(self) -> ChangeIterator: ...",
        "    def __next__(self) -> Change: ...",
        "    def close(self) -> None: ...",
        "    def __enter__(self) -> ChangeIterator: ...",
        "    def __exit__(self, *exc: object) -> None: ...",
        "",
        "class _SyncStore(_Twin):",
        "    def changes(self, *args: Any, **kwargs: Any) -> ChangeIterator: ...",
        "    def transaction(self, *args: Any, **kwargs: Any) -> NoReturn: ...",
        "    def close(self) -> None: ...",
        "    def __enter__(self) -> Self: ...",
        "    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,"
        " tb: TracebackType | None) -> None: ...",
        "",
        "class SQLiteStore(_SyncStore):",
        *_constructor(AsyncSQLite.__init__),
        *_members(sync.SQLiteStore, AsyncSQLite),
        "",
        "class PostgresStore(_SyncStore):",
        *_constructor(
            inspect.unwrap(vars(AsyncPostgres)["open"].__func__),
            name="open",
            first="cls",
            returns="PostgresStore",
            decorator="@classmethod",
        ),
        *_members(sync.PostgresStore, AsyncPostgres),
        "",
    ]
    sig = inspect.signature(async_open_store)
    params = _params(sig, sys.modules[async_open_store.__module__], IMPORTS, set(), first=None)
    body += [f"def open_store({params}) -> {SYNC_STORE}: ...", ""]
    body += [
        "class Session(_Twin):",
        *_constructor(AsyncSession.__init__, replace=store_arg),
        *_constructor(
            vars(AsyncSession)["create"].__func__,
            name="create",
            first="cls",
            returns="Session",
            replace=store_arg,
            decorator="@classmethod",
        ),
        *_members(sync.Session, AsyncSession),
        "",
        "class SessionManager(_Twin):",
        *_constructor(AsyncManager.__init__, replace=store_arg),
        *_members(sync.SessionManager, AsyncManager),
        "",
        "class ToolSet(_Twin, Mapping[str, Tool]):",
        "    def __getitem__(self, name: str) -> Tool: ...",
        "    def __iter__(self) -> Iterator[str]: ...",
        "    def __len__(self) -> int: ...",
        "    def __or__(self, other: object) -> ToolSet: ...",
        "    def __ror__(self, other: object) -> ToolSet: ...",
        *_members(sync.ToolSet, AsyncToolSet),
        "",
        "class StoreSearchProvider(_AsyncStoreSearchProvider):",
        f"    def __init__(self, store: {SYNC_STORE} | Store, **kwargs: Any) -> None: ...",
        "",
        "class StoreSkillProvider(_AsyncStoreSkillProvider):",
        f"    def __init__(self, store: {SYNC_STORE} | Store, **kwargs: Any) -> None: ...",
    ]
    defined = set(sync.__all__)  # the classes and functions the stub writes out above
    written = {m[1] for line in body if (m := re.match(r"(?:class|def) (\w+)", line))}
    if missing := defined - written:
        raise LookupError(f"mindstore.sync.__all__ names {sorted(missing)}: add them to the stub")
    reexports = [n for n in mindstore.__all__ if n not in defined]
    # a re-exported name the annotations also use is imported once, from where it is defined
    exports = [f"from mindstore import {n} as {n}" for n in reexports if n not in IMPORTS.names]
    IMPORTS.reexported = set(reexports)
    head = [
        '"""Type stub of :mod:`mindstore.sync`, generated by scripts/gen_sync_stub.py from the',
        "async classes; do not edit by hand (tests/meta/test_sync_stub.py fails when stale).",
        '"""',
        "",
        *IMPORTS.lines(),
    ]
    all_names = sorted(defined | set(reexports))
    all_line = "__all__ = [" + ", ".join(f'"{n}"' for n in all_names) + "]"
    return _tidy("\n".join([*head, *exports, "", all_line, "", *body]) + "\n")


def _tidy(text: str) -> str:
    """Sort the imports and format as the project does (ruff, with the project's settings)."""
    for args in (["check", "--fix", "--select", "I,RUF022", "--quiet"], ["format"]):
        text = subprocess.run(
            [sys.executable, "-m", "ruff", *args, "--stdin-filename", str(STUB), "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the stub is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = STUB.read_text(encoding="utf-8") if STUB.exists() else ""
        if current != text:
            print(f"{STUB} is stale: run python scripts/gen_sync_stub.py", file=sys.stderr)
            return 1
        return 0
    STUB.write_text(text, encoding="utf-8")
    print(f"wrote {STUB}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
