"""BlobStore: content-addressed objects in a local folder or any fsspec file system.

Evicted media lives here, outside the database. An object is named by the SHA-256 of its bytes
(``<root>/sha256/<first two hex digits>/<64 hex digits>``), so the same screenshot evicted from
two messages is stored once, an object is never overwritten with other bytes, and a reader
checks what it reads against its name.

Durability (what makes eviction crash-safe): :meth:`BlobStore.put` returns only once the object
is complete and durable — locally it is written to a temporary file in the same folder,
``fsync``\\ ed, renamed into place and the folder ``fsync``\\ ed; on object stores (S3, R2,
MinIO through ``s3://`` and an ``endpoint_url``) a single PUT is atomic. A process killed during
a put leaves at most a temporary file, never a partial object under a real name. Objects are
never deleted by mindstore (an object may be shared by several messages and stores).

fsspec is synchronous: the async methods run it in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from mindstore._fs import open_filesystem
from mindstore.errors import MediaNotFoundError, StoreError

__all__ = ["BlobStore"]

_DIGEST = re.compile(r"[0-9a-f]{64}")


class BlobStore:
    """Content-addressed objects under ``url`` (a folder path, ``file://``, ``s3://bucket/x``,
    ``memory://x`` …).

    Args:
        url: where objects live.
        storage_options: passed to fsspec (for S3/R2/MinIO: ``endpoint_url``, ``key``,
            ``secret`` …); never recorded in a message.

    Raises:
        ValueError: ``url`` is not a non-empty string.
    """

    def __init__(self, url: str, *, storage_options: Mapping[str, Any] | None = None) -> None:
        if not isinstance(url, str) or not url.strip():
            raise ValueError(f"blob_store must be a folder path or an fsspec URL, got {url!r:.80}")
        self.url = url
        self.storage_options = dict(storage_options or {})
        self._fs: Any = None
        self._base = ""
        self._local = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"BlobStore({self.url!r})"

    def _filesystem(self) -> tuple[Any, str]:
        with self._lock:
            if self._fs is None:
                self._fs, self._base, self._local = open_filesystem(self.url, self.storage_options)
            return self._fs, self._base

    def path_of(self, digest: str) -> str:
        """Where the object named ``digest`` lives in the file system.

        Raises:
            MediaNotFoundError: ``digest`` is not 64 lower-case hex digits (a record that was
                tampered with cannot name a path outside the store).
        """
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise MediaNotFoundError(f"not a SHA-256 object name: {digest!r:.80}")
        _, base = self._filesystem()
        return f"{base}/sha256/{digest[:2]}/{digest}"

    # ---- sync (run in a worker thread by the async methods) ----------------------------------
    def put_sync(self, data: bytes) -> str:
        """Store ``data`` durably; return its SHA-256 name. An object already stored under
        that name (with the right size) is kept as it is."""
        digest = hashlib.sha256(data).hexdigest()
        path = self.path_of(digest)
        fs, _ = self._filesystem()
        try:
            if self._local:
                _local_put(path, data)
            else:
                with contextlib.suppress(FileNotFoundError):
                    if fs.size(path) == len(data):
                        return digest
                fs.pipe_file(path, data)
        except (OSError, RuntimeError, ValueError) as exc:
            raise StoreError(f"could not write media object {digest} to {self.url}: {exc}") from exc
        return digest

    def get_sync(self, digest: str) -> bytes:
        """The object's bytes, checked against its name.

        Raises:
            MediaNotFoundError: missing, or its bytes do not hash to ``digest``.
            StoreError: the file system failed otherwise.
        """
        path = self.path_of(digest)
        fs, _ = self._filesystem()
        try:
            data = bytes(fs.cat_file(path))
        except FileNotFoundError as exc:
            raise MediaNotFoundError(
                f"evicted media object {digest} is missing from {self.url}"
            ) from exc
        except (OSError, RuntimeError, ValueError) as exc:
            raise StoreError(
                f"could not read media object {digest} from {self.url}: {exc}"
            ) from exc
        if hashlib.sha256(data).hexdigest() != digest:
            raise MediaNotFoundError(
                f"media object {digest} in {self.url} is corrupt: its bytes have another SHA-256"
            )
        return data

    def exists_sync(self, digest: str) -> bool:
        fs, _ = self._filesystem()
        try:
            return bool(fs.exists(self.path_of(digest)))
        except OSError as exc:
            raise StoreError(f"could not reach the blob store {self.url}: {exc}") from exc

    # ---- async -------------------------------------------------------------------------------
    async def put(self, data: bytes) -> str:
        """:meth:`put_sync` in a worker thread."""
        return await asyncio.to_thread(self.put_sync, data)

    async def get(self, digest: str) -> bytes:
        """:meth:`get_sync` in a worker thread."""
        return await asyncio.to_thread(self.get_sync, digest)

    async def exists(self, digest: str) -> bool:
        return await asyncio.to_thread(self.exists_sync, digest)


def _local_put(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and durably (temp file, fsync, rename, fsync dir)."""
    try:
        if os.path.getsize(path) == len(data):
            return  # content-addressed: the same name holds the same bytes
    except OSError:
        pass
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".tmp-{uuid.uuid4().hex}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    # the new name, and the folders makedirs may have just created, must survive a crash too
    for d in (folder, os.path.dirname(folder)):
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
