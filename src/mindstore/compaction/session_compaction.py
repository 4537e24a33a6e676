"""Compactor: a session's compaction — overlays, ``compact()`` and automatic compaction.

A :class:`~mindstore.Session` holds one :class:`Compactor`, built with the session's store and
key, its tokenizer, the :class:`~mindstore.compaction.reader.HistoryReader` that presents its
paths and the source of its system prompt (the session's context blocks). The session's
compaction methods (``add_compaction``, ``compact``, ``on_compaction``, ``compact_after``, …)
delegate to it; ``SessionManager`` and the integrations call :meth:`Compactor.after_append`
after their own appends.

Invariants:

* Compaction never deletes or edits a stored message. A summary is an overlay row over a
  contiguous range of one path; reads replace the range (``overlays.apply_overlays``), and
  ``expand_compaction`` / ``revert_compaction`` give the originals back.
* ``add_compaction`` validates the range against the tree (both ids exist, ``from`` is an
  ancestor-or-self of ``to``) and marks the older overlays of that path that the new range
  contains as superseded by it, in the same store transaction.
* ``compact()`` stores only validated, non-empty summaries: a failed or rejected compaction
  changes nothing.
* Automatic compaction (``compact_after``) runs after an append and can never fail it: every
  error goes to the ``on_compaction_error`` handler once, or to the ``mindstore`` logger.
* The token estimate for ``compact_after`` lives in the store (``Store.token_estimate``): the
  tokens of the overlaid path to the session's leaf, extended by every append in its own
  transaction — whichever process or ``Session`` object made it — so a check after an append
  is one O(1) read. Only when the store does not know it (another branch was appended to, or
  a delete, update, compaction or skill unload cleared it) is it recomputed once from
  ``get_history`` and stored back (if nothing changed meanwhile). With a user
  ``token_counter`` the counter receives the overlaid path and the system prompt on every
  append (the user chose that cost).
* Status (DESIGN §14): ``on_status`` callbacks get a :class:`~mindstore.changes.Status` after
  every append (``idle``, with the measured context tokens) and when a compaction starts
  (``compacting``) and ends (``idle``). The change feed gets the compaction's events and its
  two status changes (``compaction_started`` + ``status`` in one write, ``status`` — or
  ``compaction_failed`` + ``status`` — in another); an append's own event is its
  ``message_appended``, so appends pay for no second write. A failing callback is logged,
  never raised.
* Back-off: when an automatic compaction leaves the context above the threshold (the head,
  summary and tail the compaction function keeps are larger than it), compacting again after
  every append would call the summariser each time for nothing. Automatic compaction then
  waits until the context has grown by ``BACKOFF_FRACTION`` of the threshold past what the
  compaction left, doubling that margin after each further compaction that stays above; the
  state lives in the store next to the estimate, and the condition is reported once per
  episode (``on_compaction_error`` handler, else a logged warning). A compaction that gets
  below the threshold — or any manual one — ends the episode.
* A failing compaction (the summariser raised: a model API outage) backs off the same way:
  after each failure the next attempt waits until the context has grown by the margin,
  which doubles with each further failure; each failure is reported once — to the handler,
  else as one logged ``ERROR`` line naming the error and the next attempt (the traceback
  only at ``DEBUG``). So an outage costs a few calls, not one per append.
* ``compact_after(..., background=True)`` moves the check and the compaction off the append
  path: ``after_append`` only records the new leaf and returns; one task per store and
  session (whichever ``Session`` object appended; on the loop of the append) checks the newest
  recorded leaf, again after it finishes when more appends came meanwhile. ``wait()`` waits
  for it, :func:`wait_background_compactions` for every one of a store (or namespace).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mindstore._async import maybe_await
from mindstore.changes import Status
from mindstore.compaction.compact_function import CompactContext, CompactResult
from mindstore.compaction.overlays import COMPACTION_ID_PREFIX, resolve_overlays
from mindstore.compaction.reader import HistoryReader
from mindstore.errors import CompactionError, MessageNotFoundError
from mindstore.messages import validate_id
from mindstore.store.base import Compaction, SessionKey, Store, TokenEstimate
from mindstore.tokens import Tokenizer, estimate_message_tokens, estimate_string_tokens

__all__ = [
    "BACKOFF_FRACTION",
    "Compactor",
    "SystemPrompt",
    "summary_has_content",
    "wait_background_compactions",
]

logger = logging.getLogger("mindstore")

#: After an automatic compaction that stays above the threshold, the next one waits until the
#: context has grown by this fraction of the threshold (doubling each time it happens again).
BACKOFF_FRACTION = 0.1

_HEADING = re.compile(r"^\s{0,3}#{1,6}(\s.*)?$")
_CONTENT = re.compile(r"\w")


def summary_has_content(summary: str) -> bool:
    """False for a blank summary or one with nothing but Markdown headings and punctuation."""
    for line in summary.splitlines():
        if _HEADING.match(line):
            continue
        if _CONTENT.search(line):
            return True
    return False


@dataclass(slots=True)
class _Background:
    """The background compaction of one session of one store: the task, and the newest leaf
    appended since it last looked (it checks that one next)."""

    task: asyncio.Task[None] | None = None
    queued: str | None = None


# One background task per (store, session) whichever Session object appended — a server that
# builds a Session per request must not start one compaction per request. Entries go when their
# task ends; the store's id() cannot be reused while the task holds the store.
_BACKGROUND: dict[tuple[int, SessionKey], _Background] = {}


def _slot_key(store: Store, key: SessionKey) -> tuple[int, SessionKey]:
    return (id(store), key)


async def _wait_for(match: Callable[[tuple[int, SessionKey]], bool]) -> None:
    loop = asyncio.get_running_loop()
    while True:
        tasks = {
            slot.task
            for key, slot in list(_BACKGROUND.items())
            if match(key)
            and slot.task is not None
            and not slot.task.done()
            and slot.task.get_loop() is loop
        }
        if not tasks:
            return
        await asyncio.wait(tasks)


async def wait_background_compactions(store: Store, namespace: str | None = None) -> None:
    """Return once no background compaction (``compact_after(..., background=True)``) of
    ``store`` — of ``namespace`` only, when given — is running."""
    await _wait_for(
        lambda k: k[0] == id(store) and (namespace is None or k[1].namespace == namespace)
    )


class SystemPrompt(Protocol):
    """The session's system prompt, as compaction needs it: measured with the path, and
    refreshed after a compaction (the session's context blocks provide it)."""

    async def freeze_system_prompt(self) -> str: ...

    async def refresh_system_prompt(self) -> str: ...


class Compactor:
    """The compaction of one session; see the module docstring."""

    def __init__(
        self,
        store: Store,
        key: SessionKey,
        *,
        tokenizer: Tokenizer | None,
        reader: HistoryReader,
        prompt: SystemPrompt,
    ) -> None:
        self._store = store
        self._key = key
        self._tokenizer = tokenizer
        self._reader = reader
        self._prompt = prompt
        # configuration (the session's builder methods)
        self._fn: Callable[..., Any] | None = None
        self._threshold: int | None = None
        self._token_counter: Callable[..., Any] | None = None
        self._error_handler: Callable[[BaseException], Any] | None = None
        self._status_callbacks: list[Callable[[Status], Any]] = []
        # run-time state
        self._prompt_tokens: tuple[str, int] | None = None
        self._auto_compacting = False
        self._background = False
        self._append_hooks: list[Callable[[dict[str, Any]], Awaitable[None]]] = []

    # ---- configuration (no I/O) -------------------------------------------------------------
    def on_compaction(self, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise TypeError("on_compaction takes a callable fn(messages, context)")
        self._fn = fn

    def compact_after(
        self,
        threshold: int,
        token_counter: Callable[..., Any] | None,
        *,
        background: bool = False,
    ) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or threshold <= 0:
            raise ValueError("compact_after threshold must be a positive number of tokens")
        if token_counter is not None and not callable(token_counter):
            raise TypeError("token_counter must be a callable counter(messages, system_prompt)")
        if not isinstance(background, bool):
            raise TypeError(f"background must be True or False, got {background!r:.40}")
        self._threshold = threshold
        self._token_counter = token_counter
        self._background = background

    @property
    def running(self) -> bool:
        """Whether a background compaction check of this session is under way (started by
        this or another ``Session`` object of the same store and session)."""
        slot = _BACKGROUND.get(_slot_key(self._store, self._key))
        return slot is not None and slot.task is not None and not slot.task.done()

    def on_compaction_error(self, handler: Callable[[BaseException], Any | Awaitable[Any]]) -> None:
        if not callable(handler):
            raise TypeError("on_compaction_error takes a callable handler(error)")
        self._error_handler = handler

    def add_append_hook(self, hook: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        """Run ``hook(message)`` after every fresh append, before the compaction check (the
        session's automatic media eviction). A hook must not raise."""
        self._append_hooks.append(hook)

    def on_status(self, callback: Callable[[Status], Any]) -> None:
        if not callable(callback):
            raise TypeError("on_status takes a callable callback(status)")
        self._status_callbacks.append(callback)

    # ---- status ----------------------------------------------------------------------------------
    async def _status(
        self,
        state: str,
        tokens: int | None,
        *,
        events: Sequence[tuple[str, dict[str, Any]]] | None = None,
    ) -> None:
        """Tell the ``on_status`` callbacks; with ``events``, first record them and the status
        in the change feed (one write)."""
        status = Status(
            namespace=self._key.namespace,
            session_id=self._key.session_id,
            state="compacting" if state == "compacting" else "idle",
            token_estimate=tokens,
            threshold=int(self._threshold) if self._threshold is not None else None,
        )
        if events is not None:
            await self._store.record_changes(self._key, [*events, ("status", status.as_data())])
        for callback in self._status_callbacks:
            try:
                await maybe_await(callback(status))
            except Exception:
                logger.exception("an on_status callback of session %r raised", status.session_id)

    # ---- automatic compaction -------------------------------------------------------------------
    async def after_append(self, message: dict[str, Any]) -> None:
        """The automatic steps after a fresh insert of ``message`` — the append hooks, then the
        compaction check (call it after every append that inserted; for a batch, once with its
        last new message). Never raises: compaction errors go to the ``on_compaction_error``
        handler, else the log; the ``on_status`` callbacks hear the context's size. With
        ``background=True`` the check is only scheduled and this returns at once."""
        for hook in self._append_hooks:
            await hook(message)
        if self._threshold is None and not self._status_callbacks:
            return
        mid = str(message["id"])
        if not self._background:
            await self._check(mid)
            return
        key = _slot_key(self._store, self._key)
        loop = asyncio.get_running_loop()
        slot = _BACKGROUND.get(key)
        if slot is None or (slot.task is not None and slot.task.get_loop() is not loop):
            # (a task of a loop that is gone — or another one — is not this loop's to join)
            slot = _BACKGROUND[key] = _Background()
        slot.queued = mid
        if slot.task is None or slot.task.done():
            task = loop.create_task(
                self._drain(slot), name=f"mindstore compaction of {self._key.session_id!r}"
            )
            slot.task = task

            def forget(done: asyncio.Task[None]) -> None:
                if _BACKGROUND.get(key) is slot and slot.task is done:
                    del _BACKGROUND[key]

            task.add_done_callback(forget)

    async def wait(self) -> None:
        """Return once no background compaction check of this session is running (each one's
        errors went to the handler or the log). Cancelling the wait does not cancel it."""
        await _wait_for(lambda k: k == _slot_key(self._store, self._key))

    async def _drain(self, slot: _Background) -> None:
        while (mid := slot.queued) is not None:
            slot.queued = None
            await self._check(mid)

    async def _check(self, mid: str) -> None:
        threshold = self._threshold
        if (threshold is None and not self._status_callbacks) or self._auto_compacting:
            return
        try:
            before = await self._store.token_estimate(self._key)
            tokens, path_tokens = await self._measure(mid, before)
            await self._status("idle", tokens)
            if threshold is None:
                return
            floor = before.floor if before is not None else None
            if tokens <= max(threshold, floor or 0):
                return
            self._auto_compacting = True
            try:
                stored = await self.compact(leaf_id=mid)
            except Exception as exc:
                next_floor = await self._back_off_after_failure(mid, tokens, path_tokens)
                await self._report_failure(exc, next_floor)
                return
            finally:
                self._auto_compacting = False
            if stored is not None:
                await self._after_auto_compaction(mid, threshold, before)
        except Exception as exc:
            await self._report_error(exc)

    async def _back_off_after_failure(self, mid: str, tokens: int, path_tokens: int) -> int | None:
        """After a failed compaction (which changed nothing): wait until the context exceeds
        ``tokens`` plus a margin that doubles with each failure in a row. Returns that floor,
        or None when it could not be recorded (a concurrent write changed the path)."""
        est = await self._store.token_estimate(self._key)
        if est is None:
            return None
        assert self._threshold is not None
        base = max(1, int(self._threshold * BACKOFF_FRACTION))
        margin = base if est.margin is None else est.margin * 2
        floor = tokens + margin
        written = await self._store.set_token_estimate(
            self._key,
            leaf_id=mid,
            tokens=path_tokens,
            version=est.version,
            floor=floor,
            margin=margin,
        )
        return floor if written else None

    async def _measure(
        self, mid: str, est: TokenEstimate | None, *, force: bool = False
    ) -> tuple[int, int]:
        """(context tokens — the overlaid path to ``mid`` plus the system prompt —, the path's
        built-in estimate). Uses the store's running estimate when it is for ``mid``; otherwise
        recomputes it and stores it back (unless ``force``: the caller stores it)."""
        counter = self._token_counter
        if counter is None and not force and est is not None and est.leaf_id == mid:
            assert est.tokens is not None
            path_tokens = est.tokens
        else:
            history = await self._reader.history(mid)
            path_tokens = estimate_message_tokens(history, self._tokenizer)
            if counter is not None:
                prompt = await self._prompt.freeze_system_prompt()
                return int(await maybe_await(counter(history, prompt))), path_tokens
            if est is not None and est.tokens is None and not force:
                # (an estimate known for another leaf is a newer writer's: left alone)
                await self._store.set_token_estimate(
                    self._key,
                    leaf_id=mid,
                    tokens=path_tokens,
                    version=est.version,
                    floor=est.floor,
                    margin=est.margin,
                )
        prompt_tokens = self._system_prompt_tokens(await self._prompt.freeze_system_prompt())
        return path_tokens + prompt_tokens, path_tokens

    async def _after_auto_compaction(
        self, mid: str, threshold: int, before: TokenEstimate | None
    ) -> None:
        """Store the new estimate; back off when the compaction left the context above the
        threshold (see the module docstring), reporting it once per episode."""
        est = await self._store.token_estimate(self._key)  # the compaction cleared it
        if est is None:
            return
        tokens, path_tokens = await self._measure(mid, est, force=True)
        floor = margin = None
        if tokens > threshold:
            previous = before.margin if before is not None else None
            margin = max(1, int(threshold * BACKOFF_FRACTION)) if previous is None else previous * 2
            floor = tokens + margin
        await self._store.set_token_estimate(
            self._key,
            leaf_id=mid,
            tokens=path_tokens,
            version=est.version,
            floor=floor,
            margin=margin,
        )
        if floor is not None and (before is None or before.margin is None):
            await self._report_notice(
                CompactionError(
                    f"automatic compaction of session {self._key.session_id!r} left {tokens} "
                    f"tokens, still above the compact_after threshold of {threshold}: the "
                    "compaction function keeps more than that (head, summary and tail). "
                    f"Automatic compaction now waits until the context exceeds {floor} tokens "
                    "(the margin doubles each time this repeats). Raise the threshold or keep "
                    "a smaller tail (create_compact_function(tail_token_budget=...))."
                )
            )

    # ---- overlays ------------------------------------------------------------------------------
    async def get_compactions(self) -> list[Compaction]:
        """Every overlay of the session in creation order."""
        return await self._store.get_compactions(self._key)

    async def add_compaction(self, summary: str, from_id: str, to_id: str) -> Compaction:
        """Validate the range and store an overlay; see :meth:`mindstore.Session.add_compaction`."""
        if not isinstance(summary, str) or not summary.strip():
            raise ValueError("summary must be a non-blank string")
        validate_id(from_id, "from_id")
        validate_id(to_id, "to_id")
        found = {r.id for r in await self._store.get_messages(self._key, [from_id, to_id])}
        compactions = await self._store.get_compactions(self._key)
        # a virtual summary id seen in get_history() stands for the end of its range
        virtual = {f"{COMPACTION_ID_PREFIX}{c.id}": c for c in compactions}
        if from_id not in found and from_id in virtual:
            from_id = virtual[from_id].from_message_id
            found.add(from_id)
        if to_id not in found and to_id in virtual:
            to_id = virtual[to_id].to_message_id
            found.add(to_id)
        for mid in (from_id, to_id):
            if mid not in found:
                raise MessageNotFoundError(
                    f"message {mid!r} does not exist in session {self._key.session_id!r}"
                )
        rows = await self._store.path(self._key, to_id)
        ids = [r.id for r in rows]
        if from_id not in ids:
            raise ValueError(
                f"cannot compact {from_id!r}..{to_id!r}: {from_id!r} is not an earlier message "
                f"on the path to {to_id!r}; a compaction covers a contiguous range of one path, "
                "from_id first"
            )
        return await self._store_compaction(summary, ids, ids.index(from_id), compactions)

    async def expand_compaction(self, compaction_id: int) -> list[dict[str, Any]]:
        """The stored messages behind a summary, oldest first."""
        c = await self._find_compaction(compaction_id)
        rows = await self._store.path(self._key, c.to_message_id)
        ids = [r.id for r in rows]
        start = ids.index(c.from_message_id) if c.from_message_id in ids else len(ids) - 1
        return [r.message for r in rows[start:]]

    async def revert_compaction(self, compaction_id: int) -> Compaction:
        """Mark one overlay reverted; see :meth:`mindstore.Session.revert_compaction`."""
        if isinstance(compaction_id, bool) or not isinstance(compaction_id, int):
            raise CompactionError(f"compaction ids are integers, got {compaction_id!r}")
        return await self._store.revert_compaction(self._key, compaction_id)

    async def compact(self, leaf_id: str | None = None) -> Compaction | None:
        """Run the compaction function on a path; see :meth:`mindstore.Session.compact`."""
        fn = self._fn
        if fn is None:
            raise CompactionError(
                "no compaction function is registered; call session.on_compaction(fn), "
                "e.g. with create_compact_function(summarize=...)"
            )
        rows = await self._store.path(self._key, leaf_id)
        if not rows:
            return None
        compactions = await self._store.get_compactions(self._key)
        history = await self._reader.present(rows, compactions=compactions)
        context = CompactContext(
            token_counter=self._context_token_counter(),
            session_id=self._key.session_id,
            namespace=self._key.namespace,
            leaf_id=rows[-1].id,
        )
        leaf = rows[-1].id
        tokens: int | None = estimate_message_tokens(history, self._tokenizer)
        tokens = (tokens or 0) + self._system_prompt_tokens(
            await self._prompt.freeze_system_prompt()
        )
        await self._status("compacting", tokens, events=[("compaction_started", {"leaf_id": leaf})])
        try:
            stored = await self._run_compaction(fn, rows, compactions, history, context)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
            try:
                failed = ("compaction_failed", {"leaf_id": leaf, "error": error})
                await self._status("idle", tokens, events=[failed])
            except Exception:
                logger.exception("recording the failed compaction in the change feed failed")
            raise
        if stored is not None:
            after = await self._store.token_estimate(self._key)
            tokens, _ = await self._measure(leaf, after)
        await self._status("idle", tokens, events=[])
        return stored

    async def _run_compaction(
        self,
        fn: Callable[..., Any],
        rows: Sequence[Any],
        compactions: Sequence[Compaction],
        history: list[dict[str, Any]],
        context: CompactContext,
    ) -> Compaction | None:
        """Call the compaction function, validate and store its result (see :meth:`compact`)."""
        result = await maybe_await(fn(history, context))
        if result is None:
            return None
        from_id, to_id, summary = _check_result(result)
        ids = [r.id for r in rows]
        pos = {mid: i for i, mid in enumerate(ids)}
        by_id = {f"{COMPACTION_ID_PREFIX}{c.id}": c for c in compactions}
        if from_id not in pos and from_id in by_id:
            from_id = by_id[from_id].from_message_id
        if to_id not in pos and to_id in by_id:
            to_id = by_id[to_id].to_message_id
        if from_id not in pos or to_id not in pos or pos[from_id] > pos[to_id]:
            raise CompactionError(
                f"the compaction function returned the range {from_id!r}..{to_id!r}, which is "
                "not an ordered range of the path it was given; nothing was stored"
            )
        start, end = pos[from_id], pos[to_id]
        visible = resolve_overlays(ids, compactions)
        if visible:
            start = min(start, visible[0][1])  # iterative: grow the oldest visible summary
            for _, s, e in visible:
                if s <= end < e:
                    end = e  # never cut through a visible summary
        stored = await self._store_compaction(summary, ids[: end + 1], start, compactions)
        await self._prompt.refresh_system_prompt()
        return stored

    # ---- internals -----------------------------------------------------------------------------
    async def _store_compaction(
        self, summary: str, path_ids: list[str], start: int, compactions: Sequence[Compaction]
    ) -> Compaction:
        """Store an overlay over ``path_ids[start:]`` (``path_ids`` ends at ``to``)."""
        end = len(path_ids) - 1
        pos = {mid: i for i, mid in enumerate(path_ids)}
        supersedes = [
            c.id
            for c in compactions
            if not c.reverted
            and c.superseded_by is None
            and c.from_message_id in pos
            and c.to_message_id in pos
            and start <= pos[c.from_message_id] <= pos[c.to_message_id] <= end
        ]
        stored = await self._store.add_compaction(
            self._key,
            summary=summary,
            from_id=path_ids[start],
            to_id=path_ids[end],
            supersedes=supersedes,
        )
        return stored

    async def _find_compaction(self, compaction_id: int) -> Compaction:
        for c in await self._store.get_compactions(self._key):
            if c.id == compaction_id:
                return c
        raise CompactionError(
            f"no compaction {compaction_id!r} in session {self._key.session_id!r}; "
            "see session.get_compactions()"
        )

    def _context_token_counter(self) -> Callable[..., Any] | None:
        if self._token_counter is not None:
            return self._token_counter
        tokenizer = self._tokenizer
        if tokenizer is None:
            return None

        def count(messages: Sequence[dict[str, Any]], system_prompt: str = "") -> int:
            prompt = tokenizer.count(system_prompt) if system_prompt else 0
            return estimate_message_tokens(messages, tokenizer) + prompt

        return count

    def _system_prompt_tokens(self, prompt: str) -> int:
        cached = self._prompt_tokens
        if cached is not None and cached[0] == prompt:
            return cached[1]
        tokens = (
            self._tokenizer.count(prompt) if self._tokenizer else estimate_string_tokens(prompt)
        )
        self._prompt_tokens = (prompt, tokens)
        return tokens

    async def _report_notice(self, exc: CompactionError) -> None:
        """A condition worth knowing that did not fail anything: to the handler, else a
        logged warning."""
        handler = self._error_handler
        if handler is None:
            logger.warning("%s", exc)
            return
        try:
            await maybe_await(handler(exc))
        except Exception:
            logger.exception("the on_compaction_error handler itself raised")

    async def _report_failure(self, exc: BaseException, floor: int | None) -> None:
        """One report per failed compaction: to the handler, else one logged line."""
        if self._error_handler is not None or floor is None:
            await self._report_error(exc)
            return
        logger.error(
            "automatic compaction of session %r (namespace %r) failed, the message was "
            "stored: %s: %s; next attempt once the context exceeds %d tokens (the margin "
            "doubles with each failure). Register session.on_compaction_error(handler) to "
            "handle this.",
            self._key.session_id,
            self._key.namespace,
            type(exc).__name__,
            str(exc)[:300],
            floor,
        )
        logger.debug("the failed automatic compaction's traceback", exc_info=exc)

    async def _report_error(self, exc: BaseException) -> None:
        handler = self._error_handler
        if handler is None:
            logger.error(
                "automatic compaction of session %r (namespace %r) failed; the message was "
                "stored. Register session.on_compaction_error(handler) to handle this.",
                self._key.session_id,
                self._key.namespace,
                exc_info=exc,
            )
            return
        try:
            await maybe_await(handler(exc))
        except Exception:
            logger.exception("the on_compaction_error handler itself raised")


def _check_result(result: Any) -> tuple[str, str, str]:
    if isinstance(result, CompactResult):
        from_id, to_id, summary = result.from_message_id, result.to_message_id, result.summary
    else:
        try:
            from_id = result.from_message_id
            to_id = result.to_message_id
            summary = result.summary
        except AttributeError:
            raise CompactionError(
                "a compaction function must return CompactResult(from_message_id, "
                f"to_message_id, summary) or None, got {type(result).__name__}"
            ) from None
    if not isinstance(from_id, str) or not isinstance(to_id, str):
        raise CompactionError("CompactResult message ids must be strings")
    if not isinstance(summary, str) or not summary_has_content(summary):
        raise CompactionError(
            "the compaction function returned a summary with no content (blank, or only "
            "headings and punctuation); nothing was stored"
        )
    return from_id, to_id, summary
