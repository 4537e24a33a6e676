"""Model-based testing: a hypothesis state machine drives the public Session API against a small
pure-Python model of the tree, on SQLite and PostgreSQL.

The model is a second, deliberately naive implementation of DESIGN §3 and §6.1: a dict of nodes
with parents and insertion order, deletes that re-attach children to the deleted node's parent,
and overlays resolved newest-first on the path being read. After every step the machine checks
history for every leaf, branches, the latest leaf, path lengths and search hits.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from backends import drop_schema, new_schema_name, postgres_url_or_skip
from mindstore import Session
from mindstore.errors import MessageNotFoundError

COMMON = "modelword"


@dataclass
class Node:
    id: str
    parent: str | None
    seq: int
    text: str


@dataclass
class Overlay:
    id: int
    from_id: str
    to_id: str
    summary: str
    reverted: bool = False


@dataclass
class TreeModel:
    nodes: dict[str, Node] = field(default_factory=dict)
    overlays: list[Overlay] = field(default_factory=list)
    block: str = ""
    counter: itertools.count[int] = field(default_factory=itertools.count)

    def children(self, mid: str) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.parent == mid), key=lambda n: n.seq)

    def leaves(self) -> list[Node]:
        parents = {n.parent for n in self.nodes.values()}
        return [n for n in self.nodes.values() if n.id not in parents]

    def latest_leaf(self) -> Node | None:
        leaves = self.leaves()
        return max(leaves, key=lambda n: n.seq) if leaves else None

    def path(self, leaf: str) -> list[str]:
        out: list[str] = []
        cur: str | None = leaf
        while cur is not None:
            out.append(cur)
            cur = self.nodes[cur].parent
        return out[::-1]

    def history(self, leaf: str) -> list[str]:
        """Ids of the path with overlays applied (newest overlapping overlay wins)."""
        ids = self.path(leaf)
        pos = {mid: i for i, mid in enumerate(ids)}
        taken: list[tuple[int, int, Overlay]] = []
        for ov in sorted(self.overlays, key=lambda o: -o.id):
            if ov.reverted or ov.from_id not in pos or ov.to_id not in pos:
                continue
            a, b = pos[ov.from_id], pos[ov.to_id]
            if a > b or any(not (b < x or a > y) for x, y, _ in taken):
                continue
            taken.append((a, b, ov))
        out: list[str] = []
        i = 0
        starts = {a: (b, ov) for a, b, ov in taken}
        while i < len(ids):
            if i in starts:
                b, ov = starts[i]
                out.append(f"compaction_{ov.id}")
                i = b + 1
            else:
                out.append(ids[i])
                i += 1
        return out

    def delete(self, mid: str) -> None:
        node = self.nodes.pop(mid)
        for n in self.nodes.values():
            if n.parent == mid:
                n.parent = node.parent
        self.overlays = [o for o in self.overlays if mid not in (o.from_id, o.to_id)]


class Harness:
    """A store living in its own event loop, shared by every example of one test."""

    def __init__(self, backend: str, tmp: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.backend = backend
        self.token: tuple[str, str] | None = None
        if backend == "sqlite":
            from mindstore.store.sqlite import SQLiteStore

            self.store: Any = SQLiteStore(tmp / "model.db")
        else:
            from mindstore.store.postgres import PostgresStore

            url = postgres_url_or_skip()
            schema = new_schema_name()
            self.token = (url, schema)
            self.store = self.run(PostgresStore.open(url, schema=schema, min_size=1, max_size=2))

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.run(self.store.aclose())
        if self.token is not None:
            self.run(drop_schema(*self.token))
        self.loop.close()


HARNESS: Harness | None = None


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        assert HARNESS is not None
        self.h = HARNESS
        self.session = Session.create(
            self.h.store, "model", namespace=f"ns-{uuid.uuid4().hex[:12]}"
        ).with_context("notes")
        self.model = TreeModel()

    # ---- helpers ---------------------------------------------------------------------------
    def run(self, coro: Any) -> Any:
        return self.h.run(coro)

    def new_message(self) -> dict[str, Any]:
        n = next(self.model.counter)
        return {
            "id": f"m{n}",
            "role": "user" if n % 2 else "assistant",
            "parts": [{"type": "text", "text": f"{COMMON} token{n}x"}],
        }

    def add_node(self, msg: dict[str, Any], parent: str | None) -> None:
        seq = max((n.seq for n in self.model.nodes.values()), default=0) + 1
        self.model.nodes[msg["id"]] = Node(msg["id"], parent, seq, msg["parts"][0]["text"])

    # ---- rules -----------------------------------------------------------------------------
    @rule()
    def append_auto(self) -> None:
        msg = self.new_message()
        leaf = self.model.latest_leaf()
        assert self.run(self.session.append_message(msg)) is True
        self.add_node(msg, leaf.id if leaf else None)

    @rule()
    def append_root(self) -> None:
        msg = self.new_message()
        assert self.run(self.session.append_message(msg, None)) is True
        self.add_node(msg, None)

    @precondition(lambda self: self.model.nodes)
    @rule(data=st.data())
    def append_child(self, data: st.DataObject) -> None:
        parent = data.draw(st.sampled_from(sorted(self.model.nodes)))
        msg = self.new_message()
        assert self.run(self.session.append_message(msg, parent)) is True
        self.add_node(msg, parent)

    @precondition(lambda self: self.model.nodes)
    @rule(data=st.data())
    def re_append_is_noop(self, data: st.DataObject) -> None:
        mid = data.draw(st.sampled_from(sorted(self.model.nodes)))
        msg = {"id": mid, "role": "user", "parts": [{"type": "text", "text": "ignored"}]}
        assert self.run(self.session.append_message(msg)) is False

    @rule()
    def append_unknown_parent(self) -> None:
        msg = self.new_message()
        with pytest.raises(MessageNotFoundError):
            self.run(self.session.append_message(msg, "does-not-exist"))

    @precondition(lambda self: self.model.nodes)
    @rule(data=st.data())
    def update(self, data: st.DataObject) -> None:
        mid = data.draw(st.sampled_from(sorted(self.model.nodes)))
        n = next(self.model.counter)
        text = f"{COMMON} updated{n}x"
        self.run(
            self.session.update_message(
                {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}
            )
        )
        self.model.nodes[mid].text = text

    @precondition(lambda self: self.model.nodes)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        mid = data.draw(st.sampled_from(sorted(self.model.nodes)))
        self.run(self.session.delete_messages([mid]))
        self.model.delete(mid)

    @precondition(lambda self: self.model.nodes)
    @rule(data=st.data())
    def add_compaction(self, data: st.DataObject) -> None:
        to_id = data.draw(st.sampled_from(sorted(self.model.nodes)))
        path = self.model.path(to_id)
        from_id = data.draw(st.sampled_from(path))
        summary = f"summary of {from_id}..{to_id}"
        c = self.run(self.session.add_compaction(summary, from_id, to_id))
        self.model.overlays.append(Overlay(c.id, from_id, to_id, summary))

    @precondition(lambda self: any(not o.reverted for o in self.model.overlays))
    @rule(data=st.data())
    def revert_compaction(self, data: st.DataObject) -> None:
        ov = data.draw(st.sampled_from([o for o in self.model.overlays if not o.reverted]))
        self.run(self.session.revert_compaction(ov.id))
        ov.reverted = True

    @rule(text=st.text(alphabet="abc xyz\n", min_size=1, max_size=12))
    def block_append(self, text: str) -> None:
        self.run(self.session.append_context_block("notes", text))
        cur = self.model.block
        self.model.block = cur + text if (cur == "" or text.startswith("\n")) else cur + "\n" + text

    @precondition(lambda self: len(self.model.nodes) >= 8)
    @rule()
    def clear(self) -> None:
        self.run(self.session.clear_messages())
        self.model.nodes.clear()
        self.model.overlays.clear()

    # ---- invariants ------------------------------------------------------------------------
    @invariant()
    def histories_match(self) -> None:
        for leaf in self.model.leaves():
            got = [m["id"] for m in self.run(self.session.get_history(leaf.id))]
            assert got == self.model.history(leaf.id), f"history({leaf.id})"
            assert self.run(self.session.get_path_length(leaf.id)) == len(self.model.path(leaf.id))
        latest = self.model.latest_leaf()
        got_leaf = self.run(self.session.get_latest_leaf())
        assert (got_leaf["id"] if got_leaf else None) == (latest.id if latest else None)
        got_hist = [m["id"] for m in self.run(self.session.get_history())]
        assert got_hist == (self.model.history(latest.id) if latest else [])

    @invariant()
    def branches_match(self) -> None:
        for mid in list(self.model.nodes)[:5]:
            got = [m["id"] for m in self.run(self.session.get_branches(mid))]
            assert got == [n.id for n in self.model.children(mid)]

    @invariant()
    def search_matches(self) -> None:
        hits = self.run(self.session.search(COMMON, limit=1000))
        assert {h.message_id for h in hits} == set(self.model.nodes)
        for node in list(self.model.nodes.values())[:3]:
            token = node.text.split()[1]
            found = [h.message_id for h in self.run(self.session.search(token, match="all"))]
            assert found == [node.id]

    @invariant()
    def block_matches(self) -> None:
        block = self.run(self.session.get_context_block("notes"))
        assert (block.content if block else "") == self.model.block


MACHINE_SETTINGS = settings(
    max_examples=25,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.parametrize(
    "backend_name", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_session_matches_model(backend_name: str, tmp_path: Path) -> None:
    global HARNESS
    HARNESS = Harness(backend_name, tmp_path)
    try:
        SessionMachine.TestCase.settings = MACHINE_SETTINGS
        SessionMachine.TestCase().runTest()
    finally:
        HARNESS.close()
        HARNESS = None
