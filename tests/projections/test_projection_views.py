"""The read models as pure folds, without a database: they agree with the rules engine's own state."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from projection_support import GAME_SPECS, HOUSE_SPECS, expected_stats, simulate

from projections.fold import Folder
from projections.source import Decoder, ProjectionError, copy_unescape
from projections.views import (
    GameFold,
    evolve,
    fold_game,
    hand_rows,
    initial,
    match_rows,
    round_rows,
    stat_deltas,
    table_row,
)
from service.app.handler import stored_form
from service.play.simulate import SimulatedGame
from service.rules.options import Variant


def _stored_events(game: SimulatedGame) -> list[tuple[str, str]]:
    """The game's events as (type, payload text), as the projector reads them."""
    return [(new.type, json.dumps(new.payload)) for new in map(stored_form, game.events)]


def _fold(game: SimulatedGame, tournament: str = "cup") -> GameFold:
    decoder = Decoder()
    return fold_game(
        "g",
        (
            (version, decoder(kind, payload), tournament if version == 1 else "")
            for version, (kind, payload) in enumerate(_stored_events(game), start=1)
        ),
    )


#: The by-the-book games, then the house-rule games (docs/RULES.md §9), as (variant, players, seed, rules).
ALL_SPECS = [(*spec, None) for spec in GAME_SPECS] + list(HOUSE_SPECS)
ALL_IDS = [f"{v.value}-{p}-{s}" + ("-house" if rules else "") for v, p, s, rules in ALL_SPECS]


def test_the_house_rule_games_hold_every_house_rules_events() -> None:
    """What the house-rule specs fold below is worth folding: every event the house rules add."""
    kinds: Counter[str] = Counter()
    for variant, players, seed, rules in HOUSE_SPECS:
        kinds.update(type(e).__name__ for e in simulate(variant, players, seed, house_rules=rules).events)
    for kind in ("JumpedIn", "HandsTraded", "HandsRotated", "StackAccepted", "Wd4Accepted"):
        assert kinds[kind] > 0, kind


@pytest.mark.parametrize(("variant", "players", "seed", "rules"), ALL_SPECS, ids=ALL_IDS)
def test_a_folded_game_is_the_engines_final_state_and_scores(
    variant: Variant, players: int, seed: int, rules: dict[str, Any] | None
) -> None:
    game = simulate(variant, players, seed, house_rules=rules)
    view = _fold(game)
    state = game.state
    assert view.version == len(game.events)
    assert view.state == state._replace(seed=None)  # the stored GameCreated leaves the seed out
    assert view.tournament_id == "cup"
    assert view.players == state.players
    assert view.totals == state.scores
    assert [(r.round, r.winner, r.points, r.hands) for r in view.rounds] == [tuple(r) for r in state.results]
    assert list(view.stats) == expected_stats(game)
    assert view.ended

    assert [cards for _, _, cards in hand_rows(view)] == [[c.token for c in hand] for hand in state.hands]
    row = table_row(view)
    assert row is not None
    assert row[1] == variant.value and row[11] == len(game.events) and row[12] == "over"
    assert [r[1:4] for r in round_rows(view)] == [(r.round, r.winner, r.points) for r in state.results]
    assert match_rows(view) == [
        ("g", seat, state.players[seat], state.scores[seat]) for seat in range(players)
    ]


@pytest.mark.parametrize(
    ("variant", "players", "seed", "rules"), ALL_SPECS[:3] + ALL_SPECS[-4:], ids=ALL_IDS[:3] + ALL_IDS[-4:]
)
def test_the_folders_fast_path_equals_evolve_event_by_event(
    variant: Variant, players: int, seed: int, rules: dict[str, Any] | None
) -> None:
    """The folder advances only state and version for non-scoring events; in batches of any size,
    the views it materialises are those ``evolve`` gives."""
    game = simulate(variant, players, seed, house_rules=rules)
    stored = _stored_events(game)
    decoder = Decoder()
    for batch in (1, 7, 100, len(stored)):
        folder = Folder()
        view = initial("g")
        for start in range(0, len(stored), batch):
            for version, (kind, payload) in enumerate(stored[start : start + batch], start=start + 1):
                event = decoder(kind, payload)
                tournament = "cup" if version == 1 else None
                assert folder.apply("g", version, event, tournament)
                view = evolve(view, event, version, tournament_id=tournament or "")
            assert folder.view("g") == view
            folder.commit()
        assert folder.view("g") is None  # a finished game leaves memory once committed


def test_a_batch_changes_only_what_moved() -> None:
    game = simulate(Variant.CLASSIC, 3, 1)
    stored = _stored_events(game)
    decoder = Decoder()
    folder = Folder()
    for version, (kind, payload) in enumerate(stored[:40], start=1):
        assert folder.apply("g", version, decoder(kind, payload), "cup" if version == 1 else None)
    first = folder.changes()
    assert [row[1] for row in first.hands] == [0, 1, 2]
    assert len(first.tables) == 1 and len(first.match_scores) == 3
    assert sorted(first.standings) == [("cup", p) for p in sorted(game.state.players)]
    assert all(delta[0] == 1 for delta in first.player_stats.values())  # one game each
    folder.commit()
    kind, payload = stored[40]
    assert folder.apply("g", 41, decoder(kind, payload), None)
    second = folder.changes()
    assert len(second.tables) == 1
    assert len(second.hands) <= 1  # at most the seat that moved
    assert not second.match_scores and not second.standings  # no scoring event


def test_a_folder_refuses_a_gap_and_accepts_a_seeded_view() -> None:
    game = simulate(Variant.SONIC, 4, 2)
    stored = _stored_events(game)
    decoder = Decoder()
    folder = Folder()
    assert not folder.apply("g", 5, decoder(*stored[4]), None)  # no view: re-fold first
    view = fold_game("g", ((v, decoder(*stored[v - 1]), "") for v in range(1, 5)))
    folder.seed(view)
    assert folder.apply("g", 5, decoder(*stored[4]), None)
    assert not folder.apply("g", 7, decoder(*stored[6]), None)
    with pytest.raises(ValueError, match="already evolved"):
        folder.seed(view)


def test_an_unknown_event_type_moves_only_the_version() -> None:
    game = simulate(Variant.CLASSIC, 2, 5)
    view = _fold(game)
    decoder = Decoder()
    unknown = decoder("DisputeFiled", '{"by": 1}')
    assert unknown is None
    later = evolve(view, unknown, view.version + 1)
    assert later == view._replace(version=view.version + 1)


def test_the_decoder_decodes_each_payload_once() -> None:
    decoder = Decoder(max_size=3)
    first = decoder("Passed", '{"player": 1}')
    assert decoder("Passed", '{"player": 1}') is first
    assert decoder(b"Passed", b'{"player": 1}') == first
    for seat in range(5):  # overflows the cache, which starts over
        decoder("Passed", f'{{"player": {seat}}}')
    assert len(decoder.cache) <= 3
    with pytest.raises(ProjectionError, match="does not decode"):
        decoder("Passed", '{"player": "one", "extra": 1}')


def test_copy_text_fields_are_unescaped() -> None:
    assert copy_unescape(b"plain") == b"plain"
    assert copy_unescape(b"a\\tb\\\\c\\nd") == b"a\tb\\c\nd"


def test_stat_deltas_are_differences_per_seat() -> None:
    game = simulate(Variant.CLASSIC, 3, 1)
    view = _fold(game)
    deltas = {player: delta for _, player, delta in stat_deltas(None, view)}
    assert [deltas[p] for p in view.players] == list(view.stats)
    assert list(stat_deltas(view, view)) == []
