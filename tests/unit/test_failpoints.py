from __future__ import annotations

import pytest

from mindstore.store import failpoints

PLACE = failpoints.register("test.place", "tests/unit/test_failpoints.py")


def test_unarmed_place_does_nothing() -> None:
    failpoints.hit(PLACE)


def test_armed_action_runs_only_inside_the_block() -> None:
    calls: list[int] = []
    with failpoints.armed(PLACE, lambda: calls.append(1)):
        failpoints.hit(PLACE)
    failpoints.hit(PLACE)
    assert calls == [1]


def test_unknown_or_double_arming_is_refused() -> None:
    with (
        pytest.raises(ValueError, match="unknown failpoint"),
        failpoints.armed("no.such.place", lambda: None),
    ):
        pass
    with (
        failpoints.armed(PLACE, lambda: None),
        pytest.raises(ValueError, match="already armed"),
        failpoints.armed(PLACE, lambda: None),
    ):
        pass


async def test_async_place_awaits_a_coroutine_action() -> None:
    seen: list[str] = []

    async def pause() -> None:
        seen.append("awaited")

    with failpoints.armed(PLACE, pause):
        await failpoints.ahit(PLACE)
        with pytest.raises(TypeError, match="synchronous"):
            failpoints.hit(PLACE)
    assert seen == ["awaited"]
