"""The group commit's wait, as a command's latency owes it (:func:`service.store.last_group_wait`): none for
a write that went at once, alone; the round trip ahead of it for one that queued behind a write in flight."""

from __future__ import annotations

import asyncio

from service.store import EventStore, last_group_wait

from .support import new_game, played, request_hash


async def _append(store: EventStore, game: str, head: bytes) -> tuple[float, int]:
    result = await store.append(
        game,
        1,
        [played(1)],
        command_id=f"{game}:1",
        request_hash=request_hash(f"{game}:1"),
        metadata={"actor": 0},
        prev_hash=head,  # as the command handler passes it: no read before the write
    )
    return last_group_wait(), result.last_version


async def test_a_lone_write_waits_for_nothing_and_a_queued_one_for_the_write_ahead(store: EventStore) -> None:
    games = [f"group-wait-{i}" for i in range(4)]
    heads = {game: (await new_game(store, game)).last_hash for game in games}
    assert await _append(store, games[0], heads[games[0]]) == (0.0, 2)
    # Three at once: the first goes alone, at once; the others queue behind it and are sent as one group
    # when it is done, so each waited for its round trip.
    before = store.group_commit_stats()
    waits = await asyncio.gather(*(_append(store, game, heads[game]) for game in games[1:]))
    assert [version for _, version in waits] == [2, 2, 2]
    assert waits[0][0] == 0.0
    assert all(wait > 0.0 for wait, _ in waits[1:]), waits
    after = store.group_commit_stats()
    assert {key: after[key] - before[key] for key in after} == {"groups": 2, "commands": 3}
