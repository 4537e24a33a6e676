"""``mindstore delete-namespace NS``: forget a whole namespace ("delete this user").

Thin over :meth:`mindstore.SessionManager.delete_namespace` (one store transaction). It asks
before deleting unless ``--yes`` is given; no answer (end of input) deletes nothing.
"""

from __future__ import annotations

import click

from mindstore.manager import SessionManager

from .common import CliError, Out, current_env, json_option, opened, run

__all__ = ["delete_namespace"]

_NOUNS = {
    "sessions": ("session", "sessions"),
    "messages": ("message", "messages"),
    "compactions": ("compaction", "compactions"),
    "blocks": ("block", "blocks"),
    "entries": ("entry", "entries"),
    "prompts": ("frozen prompt", "frozen prompts"),
    "skill_states": ("skill state", "skill states"),
}


def summary(counts: dict[str, int]) -> str:
    """``2 sessions, 6 messages, 1 block`` (kinds with zero rows left out)."""
    words = []
    kinds = [k for k in _NOUNS if k in counts] + [k for k in counts if k not in _NOUNS]
    for kind in kinds:
        n = counts[kind]
        if n:
            one, many = _NOUNS.get(kind, (kind, kind))
            words.append(f"{n} {one if n == 1 else many}")
    return ", ".join(words)


@click.command(name="delete-namespace")
@click.argument("namespace")
@click.option("--yes", "-y", is_flag=True, help="Delete without asking.")
@json_option
def delete_namespace(namespace: str, yes: bool) -> None:
    """Delete EVERYTHING of NAMESPACE: sessions, messages, compactions, blocks, knowledge and
    skill entries, search rows, frozen prompts, skill states and usage. One transaction;
    other namespaces are untouched. Cannot be undone."""
    env = current_env()
    if not namespace or len(namespace) > 256 or "\x00" in namespace:
        raise click.UsageError("NAMESPACE must be a non-empty name of at most 256 characters")

    async def count() -> int:
        async with opened(env, read_only=True) as store:
            return await SessionManager(store, namespace=namespace).count()

    if not yes:
        sessions = run(count())
        try:
            confirmed = click.confirm(
                f"Delete namespace {namespace!r} ({sessions} sessions) and everything in it? "
                "This cannot be undone",
                err=True,
            )
        except click.Abort:  # end of input: nobody answered
            confirmed = False
        if not confirmed:
            raise CliError(
                f"nothing deleted: confirm with 'y', or pass --yes to delete namespace "
                f"{namespace!r} without asking"
            )

    async def go() -> dict[str, int]:
        async with opened(env) as store:
            return await SessionManager(store, namespace=namespace).delete_namespace()

    counts = run(go())
    out = Out()
    if env.json:
        out.json({"namespace": namespace, "deleted": counts})
        return
    if not any(counts.values()):
        click.echo(f"Namespace {namespace!r} held nothing; nothing was deleted.")
        return
    click.echo(f"Deleted namespace {namespace!r}: {summary(counts)}.")
