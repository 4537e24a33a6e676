"""Child process of test_embed_crash.py: embed_pending with a slow embedder, one line per batch.

argv: backend target [schema]. Prints ``{"batch": n}`` after each committed batch.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from embedders import HashEmbedder


class SlowEmbedder(HashEmbedder):
    def embed(self, texts: list[str]) -> list[list[float]]:
        time.sleep(0.02)
        return super().embed(texts)


async def main() -> None:
    backend, target = sys.argv[1], sys.argv[2]
    if backend == "sqlite":
        from mindstore import SQLiteStore

        store = SQLiteStore(target, embedder=SlowEmbedder())
    else:
        from mindstore import PostgresStore

        store = await PostgresStore.open(target, schema=sys.argv[3], embedder=SlowEmbedder())
    print(json.dumps({"ready": True}), flush=True)

    def batch(n: int) -> None:
        print(json.dumps({"batch": n}), flush=True)

    await store.embed_pending(batch_size=7, progress=batch)
    print(json.dumps({"done": True}), flush=True)
    await store.aclose()


asyncio.run(main())
