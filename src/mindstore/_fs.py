"""Opening an fsspec file system from a folder path or URL, as skill folders (S3, R2, MinIO…)
and the media blob store both need it. Pure of mindstore state; fsspec is imported lazily."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mindstore.errors import MissingDependencyError

__all__ = ["open_filesystem"]


def open_filesystem(url: str, storage_options: Mapping[str, Any]) -> tuple[Any, str, bool]:
    """``(file system, base path without a trailing slash, whether it is the local disk)``.

    Raises:
        MissingDependencyError: an ``s3://`` URL without the ``s3`` extra installed.
    """
    import fsspec  # type: ignore[import-untyped]

    try:
        fs, path = fsspec.core.url_to_fs(url, **storage_options)
    except ImportError as exc:
        protocol = url.split("://", 1)[0].lower() if "://" in url else ""
        if protocol in ("s3", "s3a"):
            raise MissingDependencyError("s3fs", "s3") from exc
        raise
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return fs, str(path).rstrip("/"), "file" in protocols or "local" in protocols
