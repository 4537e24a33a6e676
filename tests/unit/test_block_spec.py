"""``with_context``'s arguments are defined once (``block_spec``) and checked at the builder call.

``Session.with_context``, ``Session.add_context`` and ``SessionManager.with_context`` (and their
``mindstore.sync`` twins) must take exactly the same arguments; a bad argument must raise at the
call, before any I/O.
"""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import mindstore.sync
from mindstore import InvalidKeyError, Session, SessionManager, SQLiteStore, StaticProvider
from mindstore.context.spec import BlockSpec, block_spec
from mindstore.context.unloads import apply_skill_unloads
from mindstore.store.base import SkillState, StoredMessage


def _params(fn: Any) -> list[inspect.Parameter]:
    params = list(inspect.signature(fn).parameters.values())
    assert params[0].name == "self"
    return params[1:]


def test_every_with_context_takes_block_specs_arguments() -> None:
    expected = list(inspect.signature(block_spec).parameters.values())
    assert [p.name for p in expected] == [
        "label",
        "description",
        "max_tokens",
        "provider",
        "scope",
    ]
    for method in (
        Session.with_context,
        Session.add_context,
        SessionManager.with_context,
        mindstore.sync.Session.with_context,
        mindstore.sync.Session.add_context,
        mindstore.sync.SessionManager.with_context,
    ):
        assert _params(method) == expected, method.__qualname__


def test_add_context_stays_a_coroutine_function() -> None:
    # mindstore.sync runs coroutine methods on its loop and plain ones in the caller's thread
    assert inspect.iscoroutinefunction(Session.add_context)
    assert not inspect.iscoroutinefunction(Session.with_context)


@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        (("",), {}, InvalidKeyError),
        (("x" * 257,), {}, InvalidKeyError),
        (("notes",), {"scope": "global"}, ValueError),
        (("notes", None, 0), {}, ValueError),
        (("notes",), {"max_tokens": "100"}, ValueError),
        (("notes",), {"provider": object()}, TypeError),
        (("notes",), {"provider": {"get": "not callable"}}, TypeError),
    ],
)
def test_bad_arguments_raise_at_the_builder_call(
    tmp_path: Path, args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception]
) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    with pytest.raises(error):
        Session.create(store, "s").with_context(*args, **kwargs)
    with pytest.raises(error):
        SessionManager(store).with_context(*args, **kwargs)
    with pytest.raises(error):
        block_spec(*args, **kwargs)


def test_positional_and_keyword_arguments_build_the_same_spec() -> None:
    provider = StaticProvider("hi")
    spec = block_spec("soul", "Identity", 100, provider, "namespace")
    assert spec == BlockSpec(
        label="soul", description="Identity", max_tokens=100, provider=provider, scope="namespace"
    )
    assert block_spec(label="memory") == BlockSpec(label="memory")


# ---- skill unloads (pure) ----------------------------------------------------------------------


def _row(mid: str, seq: int, message: dict[str, Any]) -> StoredMessage:
    return StoredMessage(
        id=mid,
        parent_id=None,
        message=message,
        seq=seq,
        created_at=datetime.now(UTC),
        tokens=1,
        nbytes=1,
    )


def _load(mid: str, key: str, label: str = "skills") -> dict[str, Any]:
    part = {
        "type": "tool-load_context",
        "toolCallId": f"c-{mid}",
        "state": "output-available",
        "input": {"label": label, "key": key},
        "output": f"the {key} document",
    }
    return {"id": mid, "role": "assistant", "parts": [part]}


def test_unloads_hide_only_results_stored_at_or_before_the_mark() -> None:
    messages = [_load("a", "deploy"), _load("b", "api"), _load("c", "deploy")]
    rows = [_row(m["id"], seq, m) for seq, m in zip((1, 2, 3), messages, strict=True)]
    states = [
        SkillState(label="skills", key="deploy", loaded=True, unloaded_before_seq=2),
        SkillState(label="skills", key="api", loaded=True, unloaded_before_seq=None),
    ]
    out = apply_skill_unloads(rows, messages, states)
    assert [m["parts"][0]["output"] for m in out] == [
        "[skill unloaded: deploy]",  # stored before the unload
        "the api document",  # never unloaded
        "the deploy document",  # loaded again after the unload
    ]
    assert messages[0]["parts"][0]["output"] == "the deploy document"  # copies, not edits


def test_no_unload_mark_returns_the_messages_untouched() -> None:
    messages = [_load("a", "deploy")]
    rows = [_row("a", 1, messages[0])]
    states = [SkillState(label="skills", key="deploy", loaded=True, unloaded_before_seq=None)]
    assert apply_skill_unloads(rows, messages, states) is messages
    other_label = [SkillState(label="other", key="deploy", loaded=False, unloaded_before_seq=5)]
    assert apply_skill_unloads(rows, messages, other_label) == messages
