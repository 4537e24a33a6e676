"""The ``mindstore mcp --config FILE`` format: which context blocks the MCP server offers.

Pure parsing and validation (reading the config file and the readonly blocks' ``file``s is the
only I/O): a bad config is a :class:`~mindstore.errors.ConfigError` whose one-line message says
where and what to change. YAML (``.yaml``/``.yml``) and TOML (``.toml``) are accepted; both
describe the same mapping::

    session: desktop            # optional; --session overrides it (default "default")
    cached_prompt: false        # persist the frozen prompt per session
    blocks:
      - label: soul
        kind: readonly
        text: You are a concise assistant.
      - label: guide
        kind: readonly
        file: guide.md          # relative to the config file
      - label: memory
        kind: writable
        description: Important facts learned during conversation
        max_tokens: 1100
        scope: namespace        # writable/searchable: session (default) or namespace
      - label: knowledge
        kind: searchable
        scope: namespace
      - label: skills
        kind: skills
        root: ./skills          # a folder or any fsspec URL (s3://bucket/skills)
        storage_options: {}     # optional, passed to fsspec (e.g. endpoint_url)
        keys: [deploy]          # optional allow-list
        prefix: ""              # optional folder inside root

Without ``--config`` the server offers :data:`DEFAULT_BLOCKS`: a namespace-wide writable
``memory`` (so what the agent learns survives across conversations) and a namespace-wide
searchable ``knowledge`` base.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import yaml

from mindstore.errors import ConfigError, InvalidKeyError
from mindstore.store._checks import check_name

__all__ = ["DEFAULT_BLOCKS", "BlockConfig", "ServerConfig", "load_config", "parse_config"]

Kind = Literal["writable", "readonly", "searchable", "skills"]
KINDS: Final = ("writable", "readonly", "searchable", "skills")
_TOP_KEYS: Final = {"session", "cached_prompt", "blocks"}
_BLOCK_KEYS: Final[dict[str, set[str]]] = {
    "writable": {"max_tokens", "scope"},
    "readonly": {"text", "file", "max_tokens"},
    "searchable": {"scope", "max_tokens"},
    "skills": {"root", "storage_options", "keys", "prefix", "max_tokens"},
}
_COMMON: Final = {"label", "kind", "description"}


@dataclass(frozen=True, kw_only=True, slots=True)
class BlockConfig:
    """One declared block; ``text`` holds a readonly block's content (read from ``file``)."""

    label: str
    kind: Kind
    description: str | None = None
    max_tokens: int | None = None
    scope: Literal["session", "namespace"] = "session"
    text: str | None = None
    root: str | None = None
    storage_options: dict[str, Any] = field(default_factory=dict)
    keys: tuple[str, ...] | None = None
    prefix: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerConfig:
    blocks: tuple[BlockConfig, ...]
    session: str | None = None
    cached_prompt: bool = False


DEFAULT_BLOCKS: Final = (
    BlockConfig(
        label="memory",
        kind="writable",
        description="Important facts learned during conversation",
        max_tokens=2000,
        scope="namespace",
    ),
    BlockConfig(
        label="knowledge",
        kind="searchable",
        description="Searchable knowledge base",
        scope="namespace",
    ),
)


def load_config(path: str | Path) -> ServerConfig:
    """Read and validate a YAML or TOML config file.

    Raises:
        ConfigError: the file is missing or unreadable, not YAML/TOML, or invalid.
    """
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read config {p}: {_reason(e)}") from None
    try:
        if p.suffix.lower() == ".toml":
            data: Any = tomllib.loads(raw)
        elif p.suffix.lower() in (".yaml", ".yml"):
            data = yaml.safe_load(raw)
        else:
            raise ConfigError(f"config {p}: use a .yaml, .yml or .toml file")
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as e:
        raise ConfigError(f"config {p} is not valid {p.suffix[1:].upper()}: {_reason(e)}") from None
    return parse_config(data, base=p.parent, source=str(p))


def parse_config(data: Any, *, base: Path, source: str = "config") -> ServerConfig:
    """Validate a parsed config mapping (``base`` resolves readonly ``file`` paths and local
    skill roots).

    Raises:
        ConfigError: what is wrong and where, in one line.
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a mapping with a 'blocks' list")
    _no_unknown(data, _TOP_KEYS, source)
    session = data.get("session")
    if session is not None and (not isinstance(session, str) or not session.strip()):
        raise ConfigError(f"{source}: 'session' must be a non-empty string")
    cached = data.get("cached_prompt", False)
    if not isinstance(cached, bool):
        raise ConfigError(f"{source}: 'cached_prompt' must be true or false")
    raw_blocks = data.get("blocks")
    blocks: tuple[BlockConfig, ...]
    if raw_blocks is None:
        blocks = DEFAULT_BLOCKS
    else:
        if not isinstance(raw_blocks, list):
            raise ConfigError(f"{source}: 'blocks' must be a list of block tables")
        seen: set[str] = set()
        parsed = []
        for i, raw in enumerate(raw_blocks):
            block = _parse_block(raw, base, f"{source}: blocks[{i}]")
            if block.label in seen:
                raise ConfigError(f"{source}: blocks[{i}]: duplicate label {block.label!r}")
            seen.add(block.label)
            parsed.append(block)
        blocks = tuple(parsed)
    return ServerConfig(blocks=blocks, session=session, cached_prompt=cached)


def _parse_block(raw: Any, base: Path, where: str) -> BlockConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: each block must be a mapping with 'label' and 'kind'")
    label = raw.get("label")
    if not isinstance(label, str) or not label.strip():
        raise ConfigError(f"{where}: 'label' must be a non-empty string of at most 256 characters")
    try:
        check_name(label, "'label'")  # the rule every store applies to a label
    except InvalidKeyError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    where = f"{where} ({label})"
    kind = raw.get("kind")
    if kind not in KINDS:
        raise ConfigError(f"{where}: 'kind' must be one of {', '.join(KINDS)}, got {kind!r}")
    _no_unknown(raw, _COMMON | _BLOCK_KEYS[kind], where)
    description = _optional_str(raw, "description", where)
    max_tokens = raw.get("max_tokens")
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0
    ):
        raise ConfigError(f"{where}: 'max_tokens' must be a positive integer")
    scope = raw.get("scope", "session")
    if scope not in ("session", "namespace"):
        raise ConfigError(f"{where}: 'scope' must be 'session' or 'namespace', got {scope!r}")
    common: dict[str, Any] = {
        "label": label,
        "kind": kind,
        "description": description,
        "max_tokens": max_tokens,
        "scope": scope,
    }
    if kind == "readonly":
        text, file = _optional_str(raw, "text", where), _optional_str(raw, "file", where)
        if (text is None) == (file is None):
            raise ConfigError(f"{where}: a readonly block needs exactly one of 'text' or 'file'")
        if file is not None:
            path = base / file
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise ConfigError(f"{where}: cannot read file {path}: {_reason(e)}") from None
        return BlockConfig(**common, text=text)
    if kind == "skills":
        root = _optional_str(raw, "root", where)
        if root is None or not root.strip():
            raise ConfigError(f"{where}: a skills block needs 'root' (a folder or fsspec URL)")
        if "://" not in root:
            local = base / root
            if not local.is_dir():
                raise ConfigError(f"{where}: skills root {local} is not a folder")
            root = str(local)
        options = raw.get("storage_options", {})
        if not isinstance(options, Mapping):
            raise ConfigError(f"{where}: 'storage_options' must be a mapping")
        keys = raw.get("keys")
        if keys is not None and (
            not isinstance(keys, list) or not all(isinstance(k, str) for k in keys)
        ):
            raise ConfigError(f"{where}: 'keys' must be a list of strings")
        prefix = _optional_str(raw, "prefix", where) or ""
        return BlockConfig(
            **common,
            root=root,
            storage_options=dict(options),
            keys=None if keys is None else tuple(keys),
            prefix=prefix,
        )
    return BlockConfig(**common)


def _no_unknown(raw: Mapping[Any, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})"
        )


def _optional_str(raw: Mapping[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{where}: {key!r} must be a string")
    return value


def _reason(e: BaseException) -> str:
    return " ".join(str(getattr(e, "strerror", None) or e).split())
