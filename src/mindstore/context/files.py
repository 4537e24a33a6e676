"""FileSkillProvider: skills in a local folder or any fsspec file system.

Layouts read, in order of precedence for one key:

1. ``<key>.md`` — a Markdown file with optional YAML front matter (``name``, ``description``);
2. ``<key>/SKILL.md`` — an Agent-Skills folder (other files in it belong to the skill);
3. ``<key>`` — a bare object without an extension, the way the Cloudflare Agents SDK's
   ``R2SkillProvider`` stores skills in a bucket: the object is the document and its
   description is the object's ``description`` metadata (S3/R2 user metadata; front matter
   is honoured too). Objects with another extension (``notes.txt``) are not skills.

Containment. A key can never name a path outside the root (:func:`check_key` refuses ``..``,
absolute paths, backslashes, encoded tricks). On a local file system symbolic links could still
lead out, so every local read and write is checked against the *resolved* root, race-free:

* reads open the file (``O_NONBLOCK``: a FIFO cannot hang the call) and check the real path of
  the opened descriptor (``/proc/self/fd`` on Linux, ``F_GETPATH`` on macOS) — a link swapped
  in after any check is caught, because the check is on what was opened; non-regular files are
  refused too;
* writes walk the key's folders one descriptor at a time from the root, checking each opened
  folder's real path, create the file under a temporary name with ``O_EXCL | O_NOFOLLOW`` and
  rename it into place (a rename replaces a link, it never writes through one); an existing
  link at the target is refused;
* listing does not descend into linked folders and skips links that resolve outside the root.

Links that stay inside the root work. A refused write raises
:class:`~mindstore.errors.InvalidKeyError`; a refused read behaves like a missing skill.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
import threading
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mindstore._fs import open_filesystem
from mindstore.context.frontmatter import (
    one_line,
    parse_front_matter,
    render_document,
    skill_listing,
)
from mindstore.context.keys import check_key, require_key
from mindstore.errors import InvalidKeyError

__all__ = ["FileSkillProvider"]

_SKILL_FILE = "SKILL.md"
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _fd_real_path(fd: int, fallback: str) -> str:
    """The real path of an open descriptor (what was actually opened)."""
    if sys.platform.startswith("linux"):
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    if sys.platform == "darwin":  # pragma: no cover - macOS only
        import fcntl

        try:
            raw = fcntl.fcntl(fd, fcntl.F_GETPATH, b"\0" * 1024)  # type: ignore[attr-defined]
            return os.fsdecode(raw.rstrip(b"\0"))
        except OSError:
            pass
    return os.path.realpath(fallback)  # pragma: no cover - best effort elsewhere


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _bare(rel: str) -> bool:
    """A bare object (reference layout): no extension in its last segment."""
    return "." not in rel.rsplit("/", 1)[-1]


class FileSkillProvider:
    """A loadable block over skills in a folder or any fsspec URL (see the module docstring).

    Keys may contain ``/`` (``guides/deploy``).

    Args:
        root: a local path or an fsspec URL (``s3://bucket/skills``, ``memory://skills``).
        prefix: a sub-folder of ``root`` holding the skills (``"skills/"``).
        keys: an allow-list; other keys are neither listed nor loadable.
        storage_options: passed to fsspec (for S3/R2/MinIO: ``{"endpoint_url": ..., "key": ...,
            "secret": ...}``).

    Raises:
        InvalidKeyError: ``prefix`` is not a safe relative folder name.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        prefix: str = "",
        keys: Sequence[str] | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.root = str(root)
        self.prefix = prefix.strip("/")
        if self.prefix:
            require_key(self.prefix, "prefix")
        if isinstance(keys, str):
            raise TypeError("keys must be a list of keys, not a string")
        self.keys: frozenset[str] | None = frozenset(keys) if keys is not None else None
        self.storage_options = dict(storage_options or {})
        self._fs: Any = None
        self._base = ""
        self._local = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FileSkillProvider({self.root!r}, prefix={self.prefix!r})"

    # -- file system (fsspec is synchronous; calls run in a worker thread) --
    def _filesystem(self) -> tuple[Any, str]:
        with self._lock:
            if self._fs is None:
                fs, base, self._local = open_filesystem(self.root, self.storage_options)
                if self.prefix:
                    base = f"{base}/{self.prefix}" if base else self.prefix
                self._fs, self._base = fs, base
            return self._fs, self._base

    def _allowed(self, key: str) -> bool:
        return check_key(key) is None and (self.keys is None or key in self.keys)

    @staticmethod
    def _candidates(key: str) -> list[str]:
        rels = [f"{key}.md", f"{key}/{_SKILL_FILE}"]
        if _bare(key):
            rels.append(key)
        return rels

    # -- local, symlink-safe --
    def _real_root(self) -> str | None:
        _, base = self._filesystem()
        real = os.path.realpath(base)
        return real if os.path.isdir(real) else None

    def _local_read(self, rel: str) -> bytes | None:
        root = self._real_root()
        if root is None:
            return None
        path = os.path.join(root, *rel.split("/"))
        try:
            fd = os.open(path, _READ_FLAGS)
        except OSError:  # missing, a folder on the way is a file, a dangling link, ...
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            if not _within(_fd_real_path(fd, path), root):
                return None  # a link (possibly swapped in just now) leads out of the root
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        except OSError:
            return None
        finally:
            os.close(fd)

    def _local_write(self, rel: str, data: bytes) -> None:
        _, base = self._filesystem()
        os.makedirs(base, exist_ok=True)
        root = os.path.realpath(base)
        *folders, name = rel.split("/")
        dfd = os.open(root, _DIR_FLAGS)
        try:
            for folder in folders:
                try:
                    nfd = os.open(folder, _DIR_FLAGS, dir_fd=dfd)
                except FileNotFoundError:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(folder, 0o777, dir_fd=dfd)
                    nfd = os.open(folder, _DIR_FLAGS | _NOFOLLOW, dir_fd=dfd)
                os.close(dfd)
                dfd = nfd
                if not _within(_fd_real_path(dfd, os.path.join(root, folder)), root):
                    raise InvalidKeyError(
                        f"skill {rel!r} would be written outside the skills root {root!r} "
                        "(a folder on its path is a symbolic link leading out); nothing was "
                        "written"
                    )
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                raise InvalidKeyError(
                    f"skill {rel!r} is a symbolic link; it is not written through (the link "
                    "could lead outside the skills root). Replace the link with a file"
                )
            tmp = f".{name}.{uuid.uuid4().hex}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666, dir_fd=dfd)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            except BaseException:
                os.close(fd)
                os.unlink(tmp, dir_fd=dfd)
                raise
            os.close(fd)
            try:
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except OSError:
                os.unlink(tmp, dir_fd=dfd)
                raise
        finally:
            os.close(dfd)

    def _local_files(self) -> list[str]:
        """Relative paths of the regular files under the root (links inside the root count;
        linked folders are not descended)."""
        root = self._real_root()
        if root is None:
            return []
        rels = []
        for folder, _dirs, files in os.walk(root, followlinks=False):
            for f in files:
                full = os.path.join(folder, f)
                if os.path.islink(full):
                    real = os.path.realpath(full)
                    if not _within(real, root) or not os.path.isfile(real):
                        continue
                rels.append(os.path.relpath(full, root).replace(os.sep, "/"))
        return rels

    # -- reading and writing through either path --
    def _read(self, rel: str) -> bytes | None:
        fs, base = self._filesystem()
        if self._local:
            return self._local_read(rel)
        try:
            return bytes(fs.cat_file(f"{base}/{rel}"))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def _exists(self, rel: str) -> bool:
        return self._read(rel) is not None

    def _object_description(self, rel: str) -> str | None:
        """The ``description`` user metadata of a bare object (S3/R2), if the file system
        keeps object metadata."""
        fs, base = self._filesystem()
        if self._local or not hasattr(fs, "metadata"):
            return None
        try:
            meta = fs.metadata(f"{base}/{rel}")
        except Exception:
            return None
        return one_line(meta.get("description")) if isinstance(meta, Mapping) else None

    def _entry_sync(self, key: str) -> tuple[str, str | None] | None:
        for rel in self._candidates(key):
            raw = self._read(rel)
            if raw is None:
                continue
            meta, body = parse_front_matter(raw.decode("utf-8", errors="replace"))
            description = one_line(meta.get("description"))
            if description is None and rel == key:
                description = self._object_description(rel)
            return body, description
        return None

    def _list_sync(self) -> list[tuple[str, str | None]]:
        fs, base = self._filesystem()
        if self._local:
            rels = self._local_files()
        else:
            try:
                files = fs.find(base) if fs.exists(base) else []
            except FileNotFoundError:
                files = []
            rels = [str(f)[len(base) + 1 :] for f in files if str(f).startswith(base + "/")]
        skill_dirs = {r[: -len(_SKILL_FILE) - 1] for r in rels if r.endswith("/" + _SKILL_FILE)}
        found: dict[str, tuple[int, str]] = {}  # key -> (precedence, rel)
        for rel in rels:
            if rel.endswith("/" + _SKILL_FILE):
                key, rank = rel[: -len(_SKILL_FILE) - 1], 1
            elif rel.endswith(".md") and rel.rsplit("/", 1)[-1] != _SKILL_FILE:
                key, rank = rel[: -len(".md")], 0
            elif _bare(rel):
                key, rank = rel, 2
            else:
                continue
            # files inside a skill folder belong to that skill
            parent = key.rsplit("/", 1)[0] if "/" in key else None
            if parent is not None and any(
                parent == d or parent.startswith(d + "/") for d in skill_dirs
            ):
                continue
            if key in skill_dirs and rank == 2:
                continue
            if self._allowed(key) and (key not in found or rank < found[key][0]):
                found[key] = (rank, rel)
        if self._local:
            contents = {rel: self._local_read(rel) for _, rel in found.values()}
        else:
            paths = {f"{base}/{rel}": rel for _, rel in found.values()}
            raw = fs.cat(list(paths), on_error="omit") if paths else {}
            if not isinstance(raw, dict):  # a single path returns bytes
                raw = {next(iter(paths)): raw}
            contents = {}
            for path, data in raw.items():
                got = paths.get(path) or paths.get(fs._strip_protocol(path))
                if got is not None:
                    contents[got] = data
        items = []
        for key, (rank, rel) in found.items():
            data = contents.get(rel)
            if data is None and self._local:
                continue  # refused (a link leading out) or vanished
            desc = None
            if data is not None:
                meta, _ = parse_front_matter(bytes(data).decode("utf-8", errors="replace"))
                desc = one_line(meta.get("description"))
            if desc is None and rank == 2:
                desc = self._object_description(rel)
            items.append((key, desc))
        return items

    def _set_sync(self, key: str, content: str, description: str | None) -> None:
        fs, base = self._filesystem()
        folder_form = f"{key}/{_SKILL_FILE}"
        rel = folder_form if self._exists(folder_form) else f"{key}.md"
        meta, body = parse_front_matter(content)
        # capped: a description goes into every prompt that lists the skill
        description = one_line(meta.get("description") if description is None else description)
        data = render_document(key, body, description).encode("utf-8")
        if self._local:
            self._local_write(rel, data)
        else:
            fs.pipe_file(f"{base}/{rel}", data)

    # -- provider API --
    async def get(self) -> str:
        """``- key: description`` (or ``- key``) lines, sorted by key."""
        return skill_listing(await asyncio.to_thread(self._list_sync))

    async def load(self, key: str) -> str | None:
        """The skill's body without front matter; ``None`` if missing, not allowed or unsafe."""
        entry = await self.read_entry(key)
        return None if entry is None else entry[0]

    async def read_entry(self, key: str) -> tuple[str, str | None] | None:
        """``(body, description)`` of the skill ``key``, or ``None`` (as :meth:`load`)."""
        if not self._allowed(key):
            return None
        return await asyncio.to_thread(self._entry_sync, key)

    async def set(self, key: str, content: str, description: str | None = None) -> None:
        """Write ``<key>.md`` (or the existing ``<key>/SKILL.md``) with front matter.

        Raises:
            InvalidKeyError: the key could escape the root, is not in ``keys``, or (local
                folders) its path goes through a symbolic link leading out of the root or
                ends at a link.
        """
        require_key(key, "skill")
        if self.keys is not None and key not in self.keys:
            raise InvalidKeyError(f"skill key {key!r} is not in this provider's keys allow-list")
        if not isinstance(content, str):
            raise TypeError("skill content must be a string")
        await asyncio.to_thread(self._set_sync, key, content, description)
