"""``mindstore embed [--rebuild]`` and the embedder option of ``search --mode``.

The embedder is named by a spec string (``--embedder`` or ``MINDSTORE_EMBEDDER``), so ``embed``
and ``search --mode semantic|hybrid`` use the same vectors when given the same spec.
"""

from __future__ import annotations

from dataclasses import asdict

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from mindstore.embeddings import Embedder, OpenAIEmbedder, default_embedder

from .common import CliError, Out, current_env, json_option, opened, run
from .progress import EmbedPhases, show

__all__ = ["cli_embedder", "embed", "embedder_option"]


def cli_embedder(spec: str) -> Embedder:
    """``default`` (the offline model of the ``embeddings`` extra) or ``openai:MODEL[@DIMS]``
    (any OpenAI-compatible endpoint: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``)."""
    if spec == "default":
        return default_embedder()
    if spec.startswith("openai:") and len(spec) > len("openai:"):
        model, at, dims = spec[len("openai:") :].partition("@")
        if at and not (dims.isascii() and dims.isdigit() and int(dims) > 0):
            raise CliError(
                f"--embedder {spec}: the dimensions after '@' must be a positive whole number "
                f"(openai:{model or 'MODEL'}@N)"
            )
        if not model:
            raise CliError(f"--embedder {spec}: name the model (openai:MODEL or openai:MODEL@N)")
        try:
            return OpenAIEmbedder(model, dimensions=int(dims) if dims else None)
        except ValueError as exc:
            if not dims:
                # The only refusal of a named model without dimensions: they are unknown. The
                # library says "pass dimensions=N"; on the command line they are in the spec.
                raise CliError(
                    f"--embedder {spec}: the dimensions of model {model!r} are unknown; name "
                    f"them as openai:{model}@N (N: the length of the vectors the endpoint "
                    "returns)"
                ) from None
            raise CliError(f"--embedder {spec}: {exc}") from None
    raise CliError(
        f"--embedder {spec!r}: use 'default' (offline, the embeddings extra) or "
        "'openai:MODEL[@DIMENSIONS]' (OPENAI_BASE_URL / OPENAI_API_KEY name the endpoint)"
    )


def embedder_option(fn: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--embedder",
        "embedder_spec",
        default="default",
        show_default=True,
        envvar="MINDSTORE_EMBEDDER",
        metavar="SPEC",
        help="'default' (offline multilingual model) or 'openai:MODEL[@DIMS]'.",
    )(fn)


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("-- texts/s" if speed is None else f"{speed:,.1f} texts/s")


@click.command()
@click.option("--rebuild", is_flag=True, help="Drop every stored vector and embed all again.")
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(min=1))
@embedder_option
@json_option
def embed(rebuild: bool, batch_size: int, embedder_spec: str) -> None:
    """Embed the messages that have no vector of the embedder yet (every namespace), for
    semantic and hybrid search. Safe to interrupt: finished batches are kept."""
    env = current_env()
    embedder = cli_embedder(embedder_spec)

    async def go() -> tuple[int, int]:
        async with opened(env, embedder=embedder) as store:
            dropped = await store.drop_vectors() if rebuild else 0  # type: ignore[attr-defined]
            total = await store.pending_embeddings()  # type: ignore[attr-defined]
            err = Console(stderr=True)
            if env.json or not err.is_terminal:
                done = await store.embed_pending(batch_size=batch_size)  # type: ignore[attr-defined]
                return done, dropped
            columns = (
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                _RateColumn(),
                TimeRemainingColumn(),
            )
            phases = EmbedPhases(total, batch_size)
            with Progress(*columns, console=err, transient=True) as bar:
                task = bar.add_task("", **asdict(phases.start()))

                def on_progress(n: int) -> None:
                    show(bar, task, phases.progress(n))

                done = await store.embed_pending(  # type: ignore[attr-defined]
                    batch_size=batch_size, progress=on_progress
                )
            return done, dropped

    done, dropped = run(go())
    out = Out()
    if env.json:
        out.json({"embedded": done, "dropped": dropped, "embedder": embedder.name})
        return
    out.print(f"embedded {done} messages with {embedder.name}")
