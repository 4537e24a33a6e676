"""``mindstore export`` and ``mindstore import``: one session as a JSON Lines file, and the
store side of both.

The file format itself — records, parsing and validation — is :mod:`mindstore.formats.export`.
This module reads a session for export and writes a parsed file into a store, through the
public :class:`~mindstore.store.base.Store` methods only:

* :func:`read_export` reads everything in one read-only transaction — one snapshot — so a
  session written to meanwhile exports as it was at one instant.
* :func:`scope_import` is the policy for a file that may come from anywhere: the file does not
  choose its namespace or add namespace-wide blocks unless the caller said so.
* :func:`import_data` writes in ONE store transaction: all or nothing, and nothing of anyone
  else's is ever changed or undone; the session must not exist yet.

The commands validate the whole file before the store is opened (a malformed line is reported
as ``line N: …`` and nothing is imported), write files atomically (``-o FILE`` goes through
``FILE.part``), and show progress bars on a terminal for large files.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

import click
from rich.console import Console

from mindstore.errors import ConflictError, MindstoreError
from mindstore.formats.export import (
    ExportData,
    decode_lines,
    export_lines,
    export_records,
    parse_export,
)
from mindstore.store import Store, check_name
from mindstore.store.base import NewMessage, ScopeKey, SessionKey

from .common import (
    Out,
    checked_name,
    current_env,
    json_option,
    namespace_of,
    opened,
    require_session,
    run,
    session_key,
)
from .render import plural

__all__ = [
    "ImportScopeError",
    "export",
    "import_",
    "import_data",
    "read_export",
    "scope_import",
]


async def read_export(store: Store, key: SessionKey) -> list[dict[str, Any]]:
    """Every record of the session's export, header first (see :mod:`mindstore.formats.export`).

    Everything is read in one read-only transaction — one snapshot — so a session written to
    meanwhile (appends, compactions, deletes) exports as it was at one instant: every overlay
    and skill record names messages that are in the file.
    """
    async with store.transaction(readonly=True):
        info = await store.get_session(key)
        rows = await store.all_messages(key)
        comps = await store.get_compactions(key)
        blocks = await store.list_blocks(key.namespace, key.session_id)
        skills = await store.get_skill_states(key)
        prompt = await store.get_prompt(key)
    return export_records(
        key,
        info=info,
        rows=rows,
        compactions=comps,
        blocks=blocks,
        skills=skills,
        prompt=prompt,
    )


# ---- import: where an untrusted file may land ------------------------------------------------

DEFAULT_NAMESPACE = "default"


class ImportScopeError(MindstoreError, ValueError):
    """The file asks for more than its holder allowed: another namespace than the default, or
    namespace-scoped blocks. Nothing was imported; the message names the flag to pass."""


def scope_import(
    data: ExportData, *, namespace: str | None, namespace_blocks: bool | None
) -> ExportData:
    """Apply the import policy for a file that may come from anywhere.

    An export file names its namespace and may carry namespace-scoped blocks, which enter the
    system prompt of *every* session of that namespace. Neither is taken on the file's word:

    * ``namespace`` — the namespace the caller chose explicitly (``--namespace``), or None.
      Without one, only a file naming the default namespace is imported (into it); any other
      name is refused, so a file cannot pick an existing tenant's namespace.
    * ``namespace_blocks`` — True: import them (``--namespace-blocks``); False: leave them out
      (``--skip-namespace-blocks``); None (no choice made): refused when the file has any.

    Returns the data to import (without namespace blocks when skipped).

    Raises:
        ImportScopeError: what the file asks for and the flag that allows it.
    """
    if namespace is None and data.namespace != DEFAULT_NAMESPACE:
        raise ImportScopeError(
            f"the file names namespace {data.namespace!r}; an import goes into another "
            "namespace than the default only when you name it: pass "
            f"--namespace {data.namespace} (or --namespace NAME for another one)"
        )
    shared = [b for b in data.blocks if b["scope"] == "namespace"]
    if not shared or namespace_blocks is True:
        return data
    if namespace_blocks is False:
        return replace(data, blocks=[b for b in data.blocks if b["scope"] != "namespace"])
    labels = ", ".join(repr(b["label"]) for b in shared)
    target = namespace or data.namespace
    raise ImportScopeError(
        f"the file carries namespace-wide block(s) {labels}, which would enter the system "
        f"prompt of every session in namespace {target!r}; pass --namespace-blocks to import "
        "them or --skip-namespace-blocks to leave them out"
    )


# ---- import: write ---------------------------------------------------------------------------


async def import_data(
    store: Store,
    data: ExportData,
    *,
    namespace: str | None = None,
    session_id: str | None = None,
    chunk: int = 500,
    progress: Callable[[int], None] | None = None,
) -> SessionKey:
    """Write a validated export into ``store`` (optionally under another namespace/session id).

    The whole import is ONE store transaction (:meth:`Store.transaction`): it appears whole or
    not at all — a failure, a lost connection or a killed process leaves nothing, and running
    the import again then succeeds. It never deletes or changes rows it did not write: the
    session is claimed first by creating its registry row, so a session that exists (or is
    created concurrently by an application) makes the import fail with ConflictError and the
    application's session is left exactly as it is. Namespace-scoped blocks are written only
    where the namespace has no such block yet (or the same content).

    ``progress(n)`` is called with the number of messages written per batch.

    Raises:
        InvalidKeyError: ``namespace`` or ``session_id`` is not a valid name (e.g. empty).
        ConflictError: the target session already exists, or a namespace block of the same
            label holds different content. Nothing was written.
        MindstoreError: a store failure while writing. Nothing was written.
    """
    # An explicit empty (or otherwise invalid) namespace or session id is refused, never
    # silently replaced by the file's.
    key = SessionKey(
        namespace=check_name(data.namespace if namespace is None else namespace, "namespace"),
        session_id=check_name(data.session_id if session_id is None else session_id, "session_id"),
    )
    exists = ConflictError(
        f"session {key.session_id!r} already exists in namespace {key.namespace!r}; "
        "import it under another id with --session NEW_ID"
    )
    async with store.transaction():
        if await store.get_session(key) is not None or await store.latest_leaf(key) is not None:
            raise exists
        if data.session is not None or data.messages:
            # The claim: on PostgreSQL a concurrent creator of the same session (an append, a
            # create) waits for this transaction or makes this INSERT fail, never merges.
            try:
                await _claim(store, key, data.session or {})
            except ConflictError:
                raise exists from None
        for b in data.blocks:
            if b["scope"] == "namespace":
                sk = ScopeKey(namespace=key.namespace, session_id=None, label=b["label"])
                await store.update_block(sk, _put_if_absent(key.namespace, b))
        await _write(store, key, data, chunk, progress)
    return key


def _put_if_absent(namespace: str, block: dict[str, Any]) -> Callable[[str], str]:
    """update_block function: write the block where there is none (or the same content)."""
    content = str(block["content"])

    def put(current: str) -> str:
        if current not in ("", content):
            raise ConflictError(
                f"namespace block {block['label']!r} already exists in {namespace!r} with "
                "different content; nothing imported"
            )
        return content

    return put


async def _claim(store: Store, key: SessionKey, s: dict[str, Any]) -> None:
    await store.create_session(
        key,
        name=s.get("name"),
        parent_session_id=s.get("parent_session_id"),
        model=s.get("model"),
        source=s.get("source"),
        metadata=s.get("metadata"),
    )


async def _write(
    store: Store,
    key: SessionKey,
    data: ExportData,
    chunk: int,
    progress: Callable[[int], None] | None,
) -> None:
    if data.session is not None:
        s = data.session
        if s.get("input_tokens") or s.get("output_tokens") or s.get("estimated_cost"):
            await store.add_usage(
                key,
                int(s.get("input_tokens") or 0),
                int(s.get("output_tokens") or 0),
                float(s.get("estimated_cost") or 0.0),
            )
        if s.get("end_reason") is not None:
            await store.update_session(key, end_reason=s["end_reason"])

    # Skill unloads are replayed at the point of the conversation where they happened, so the
    # store records the same "unloaded before" position.
    unload_after: dict[str | None, list[dict[str, Any]]] = {}
    for sk in data.skills:
        if sk["unloaded"]:
            unload_after.setdefault(sk.get("unloaded_after"), []).append(sk)

    async def replay_unloads(after: str | None) -> None:
        for sk in unload_after.get(after, []):
            await store.set_skill_loaded(key, sk["label"], sk["key"], True)
            await store.set_skill_loaded(key, sk["label"], sk["key"], False)

    await replay_unloads(None)
    batch: list[NewMessage] = []
    for item in data.messages:
        batch.append(item)
        mid = item.message["id"]
        if len(batch) >= chunk or mid in unload_after:
            await store.append(key, batch)
            if progress is not None:
                progress(len(batch))
            batch = []
            await replay_unloads(mid)
    if batch:
        await store.append(key, batch)
        if progress is not None:
            progress(len(batch))

    ids: dict[int, int] = {}
    for c in data.compactions:
        supersedes = [
            ids[o["ref"]]
            for o in data.compactions[: c["ref"] - 1]
            if o["superseded_by"] == c["ref"]
        ]
        stored = await store.add_compaction(
            key, summary=c["summary"], from_id=c["from"], to_id=c["to"], supersedes=supersedes
        )
        ids[c["ref"]] = stored.id
    for c in data.compactions:
        if c["reverted"]:
            await store.revert_compaction(key, ids[c["ref"]])

    for b in data.blocks:
        if b["scope"] == "session":  # namespace blocks: written by import_data, if absent
            await store.set_block(
                ScopeKey(namespace=key.namespace, session_id=key.session_id, label=b["label"]),
                b["content"],
            )
    for sk in data.skills:
        if sk["loaded"]:
            await store.set_skill_loaded(key, sk["label"], sk["key"], True)
    if data.prompt is not None:
        await store.put_prompt(key, data.prompt, overwrite=True)


# ---- the commands ----------------------------------------------------------------------------


@click.command()
@click.argument("session")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True),
    default="-",
    help="File to write (default: standard output).",
)
@json_option
def export(session: str, output: str) -> None:
    """Write SESSION as JSON Lines: messages with parents, overlays, blocks, skills, prompt."""
    env = current_env()
    key = session_key(env, session)

    async def go() -> list[dict[str, Any]]:
        async with opened(env, read_only=True) as store:
            await require_session(store, key)
            return await read_export(store, key)

    records = run(go())
    if output == "-":
        # The format is UTF-8 JSON Lines whatever the terminal's locale.
        sys.stdout.flush()
        binary = getattr(sys.stdout, "buffer", None)
        for line in export_lines(records):
            if binary is not None:
                binary.write(line.encode("utf-8"))
            else:  # pragma: no cover - a text-only stdout replaced by the embedding program
                sys.stdout.write(line)
        (binary or sys.stdout).flush()
        return
    target = Path(output)
    tmp = target.with_name(target.name + ".part")
    try:
        with tmp.open("w", encoding="utf-8", newline="\n") as fh:
            _write_with_progress(fh, records)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    summary = {
        "session_id": session,
        "namespace": env.namespace,
        "file": str(target),
        "messages": records[0]["messages"],
        "compactions": records[0]["compactions"],
        "blocks": records[0]["blocks"],
    }
    out = Out()
    if env.json:
        out.json(summary)
    else:
        out.err.print(f"exported {session!r}: {_counts(summary)} → {target}", markup=False)


def _counts(summary: dict[str, Any]) -> str:
    return ", ".join(plural(summary[k], k[:-1]) for k in ("messages", "compactions", "blocks"))


PROGRESS_MIN_BYTES = 1_000_000
PROGRESS_MIN_RECORDS = 20_000


def _progress_enabled(size: int, threshold: int) -> bool:
    return size >= threshold and Console(stderr=True).is_terminal


def _write_with_progress(fh: IO[str], records: list[dict[str, Any]]) -> None:
    if not _progress_enabled(len(records), PROGRESS_MIN_RECORDS):
        fh.writelines(export_lines(records))
        return
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("exporting", total=len(records))
        for i, line in enumerate(export_lines(records), start=1):
            fh.write(line)
            if i % 1000 == 0:
                bar.update(task, completed=i)


@click.command(name="import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--session", "session_id", default=None, metavar="ID", help="Import under this session id."
)
@click.option(
    "--namespace-blocks/--skip-namespace-blocks",
    "namespace_blocks",
    default=None,
    help="Import the file's namespace-wide blocks (shared by every session of the namespace), "
    "or leave them out. A file that has some is refused without one of the two.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["mindstore", "openai-chat", "openai-responses", "anthropic"]),
    default="mindstore",
    show_default=True,
    help="mindstore: a `mindstore export` file; otherwise a JSON array (or JSON Lines) of that "
    "API's messages/items, imported as one new session (default id: the file name).",
)
@json_option
def import_(
    file: str, session_id: str | None, namespace_blocks: bool | None, fmt: str = "mindstore"
) -> None:
    """Import a session exported with `mindstore export` (FILE, or - for standard input).

    The whole file is validated first: a malformed line is reported as `line N: …` and
    nothing is imported. The session must not exist yet. The file does not choose where it
    lands: a namespace other than the default needs --namespace, and namespace-wide blocks
    need --namespace-blocks (or --skip-namespace-blocks). With `--format openai-chat`,
    `openai-responses` or `anthropic` FILE holds a conversation in that API's shape.
    """
    env = current_env()
    out = Out()
    # Checked before the file is read and before the store is opened: nothing is touched.
    if fmt != "mindstore":
        from .foreign import foreign_session_id

        session_id = foreign_session_id(file, session_id)
    if session_id is not None:
        checked_name(session_id, "--session")
    namespace = namespace_of(env) if env.namespace_given else None
    # Read as bytes and decoded line by line (decode_lines), so a byte that is not UTF-8 is
    # reported with its line number, and a byte-order mark at the start is accepted.
    if file == "-":
        stream: IO[bytes] = sys.stdin.buffer
        size = 0
    else:
        stream = open(file, "rb")  # noqa: SIM115 - closed below
        size = os.fstat(stream.fileno()).st_size
    try:
        if fmt != "mindstore":
            from .foreign import parse_foreign

            assert session_id is not None
            data = parse_foreign(
                decode_lines(stream), fmt, namespace=namespace_of(env), session_id=session_id
            )
        elif _progress_enabled(size, PROGRESS_MIN_BYTES):
            from rich.progress import Progress

            with Progress(console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task("validating", total=size)
                data = parse_export(decode_lines(stream, progress=lambda n: bar.advance(task, n)))
        else:
            data = parse_export(decode_lines(stream))
    finally:
        if file != "-":
            stream.close()

    data = scope_import(data, namespace=namespace, namespace_blocks=namespace_blocks)

    async def go() -> SessionKey:
        async with opened(env, create=True) as store:
            if _progress_enabled(len(data.messages), PROGRESS_MIN_RECORDS // 4):
                from rich.progress import Progress

                with Progress(console=Console(stderr=True), transient=True) as bar:
                    task = bar.add_task("importing", total=len(data.messages))
                    return await import_data(
                        store,
                        data,
                        namespace=namespace,
                        session_id=session_id,
                        progress=lambda n: bar.advance(task, n),
                    )
            return await import_data(store, data, namespace=namespace, session_id=session_id)

    key = run(go())
    summary = {
        "namespace": key.namespace,
        "session_id": key.session_id,
        "messages": len(data.messages),
        "compactions": len(data.compactions),
        "blocks": len(data.blocks),
    }
    if env.json:
        out.json(summary)
    else:
        out.err.print(
            f"imported {key.session_id!r} into namespace {key.namespace!r}: {_counts(summary)}",
            markup=False,
        )
