"""Stored media: large ``data:`` attachments and tool-output strings of old messages moved out
of the database into a content-addressed blob store, leaving markers that reads resolve back.

* :mod:`.markers` — pure: which values leave a message, the markers and the record left in
  their place, and putting them back byte for byte;
* :mod:`.blobs` — :class:`BlobStore`, content-addressed objects in a folder or any fsspec URL;
* :mod:`.session_media` — :class:`MediaEvictor`, a session's passes (crash-safe: objects first,
  then the row) and hydrated reads.
"""

from mindstore.media.blobs import BlobStore
from mindstore.media.markers import hydrate_message, is_evicted, marker_text, plan_eviction
from mindstore.media.session_media import EvictionReport, MediaEvictor

__all__ = [
    "BlobStore",
    "EvictionReport",
    "MediaEvictor",
    "hydrate_message",
    "is_evicted",
    "marker_text",
    "plan_eviction",
]
