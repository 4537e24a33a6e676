"""Meta tests: the public surface is complete, sorted, importable and documented."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import mindstore
import mindstore.formats

ROOT = Path(__file__).resolve().parents[2]

# Names DESIGN.md promises at the top level (§1, §4, §6, §7, §10). Every one must be exported.
DESIGN_NAMES = {
    "Session",
    "SessionManager",
    "SQLiteStore",
    "PostgresStore",
    "open_store",
    "Store",
    "SearchResult",
    "SessionInfo",
    "Compaction",
    "MessageNode",
    "RecentHistory",
    "Tokenizer",
    "estimate_string_tokens",
    "estimate_message_tokens",
    "validate_message",
    "new_message_id",
    "AUTO",
    "UNSET",
    "MindstoreError",
    "InvalidMessageError",
    "MessageNotFoundError",
    "InvalidKeyError",
    "ConflictError",
    "BlockNotFoundError",
    "ReadOnlyBlockError",
    "TokenBudgetError",
    "CompactionError",
    "SchemaVersionError",
    "StoreError",
    "MissingDependencyError",
    "SessionNotFoundError",
    # context memory (§4)
    "StaticProvider",
    "StoreSearchProvider",
    "StoreSkillProvider",
    "FileSkillProvider",
    "ContextBlock",
    "Tool",
    "ToolSet",
    # compaction (§6)
    "create_compact_function",
    "CompactResult",
    "truncate_older_messages",
}


def test_all_is_sorted_and_matches_exports() -> None:
    assert mindstore.__all__ == sorted(mindstore.__all__)
    assert set(mindstore.__all__) == set(mindstore._EXPORTS)
    assert len(mindstore.__all__) == len(set(mindstore.__all__))


def test_every_export_resolves_from_its_module() -> None:
    for name, module in mindstore._EXPORTS.items():
        value = getattr(mindstore, name)
        assert getattr(importlib.import_module(module), name) is value, name


def test_design_names_are_exported() -> None:
    missing = DESIGN_NAMES - set(mindstore.__all__)
    assert not missing, f"not exported from mindstore: {sorted(missing)}"


def test_type_checking_imports_match_exports() -> None:
    """The TYPE_CHECKING block (what type checkers see) names exactly the lazy exports."""
    tree = ast.parse((ROOT / "src/mindstore/__init__.py").read_text(encoding="utf-8"))
    seen: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    for alias in stmt.names:
                        seen[alias.asname or alias.name] = stmt.module
    assert seen == mindstore._EXPORTS


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = mindstore.NoSuchThing  # type: ignore[attr-defined]


def test_formats_all_sorted_and_resolving() -> None:
    names = mindstore.formats.__all__
    assert names == sorted(names)
    for name in names:
        assert getattr(mindstore.formats, name) is not None


def test_api_reference_documents_every_public_name() -> None:
    """docs/api.md has a heading for every name in mindstore.__all__ and formats.__all__."""
    text = (ROOT / "docs/api.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^#{2,4} `([A-Za-z_][A-Za-z0-9_]*)", text, flags=re.MULTILINE))
    public = set(mindstore.__all__) | set(mindstore.formats.__all__)
    missing = public - headings
    assert not missing, f"docs/api.md lacks a section for: {sorted(missing)}"
