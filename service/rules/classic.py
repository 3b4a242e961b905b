"""Classic UNO: the effects of its faces and its first-card rules. The other rule sets build on these.

An *effect* runs after :class:`~service.rules.events.CardPlayed` has been applied; it imposes what the
card does and says whose turn comes next. It never validates: :mod:`service.rules.decide` has judged the
play already.
"""

from __future__ import annotations

from collections.abc import Callable

from .cards import Card, Face
from .engine import Act, Played
from .events import Awaiting, DirectionReversed, Wd4Accepted, Wd4Challenged
from .legality import wd4_matching
from .options import Variant
from .violations import Rule

Effect = Callable[[Act, Played], None]


def next_turn(act: Act, played: Played) -> None:
    """Number cards, Wild: the next player's turn (``turn.end``)."""
    if not played.going_out:
        s = act.state
        act.prompt((played.origin + s.direction) % len(s.players))  # next_seat(), inlined: hot


def skip(act: Act, played: Played) -> None:
    """Skip (``action.skip``): the next player loses their turn."""
    if not played.going_out:
        act.prompt(act.state.next_seat(played.origin, 2))


def reverse(act: Act, played: Played) -> None:
    """Reverse (``action.reverse``): direction flips; with two players it acts as Skip (option)."""
    act.emit(DirectionReversed())
    if played.going_out:
        return
    s = act.state
    if s.size == 2 and s.options.two_player_reverse_skips:
        act.prompt(played.origin)
    else:
        act.prompt(s.next_seat(played.origin))


def draw_two(act: Act, played: Played) -> None:
    """Draw Two (``action.draw-two``): the next player draws 2 and loses the turn."""
    s = act.state
    act.take(s.next_seat(played.origin), 2, Rule.ACTION_DRAW_TWO)
    if not played.going_out:
        act.prompt(s.next_seat(played.origin, 2))


def wild_draw_four(act: Act, played: Played) -> None:
    """Wild Draw Four (``action.wild-draw-four``): the victim must accept or challenge.

    Going out on it, the victim draws 4 with no challenge (``round.end``): the offender held nothing else.
    """
    victim = act.state.next_seat(played.origin)
    if played.going_out:
        act.take(victim, 4, Rule.ACTION_WILD_DRAW_FOUR)
    else:
        act.prompt(victim, Awaiting.WD4_RESPONSE, new_turn=False)


def pending_wd4_matching(act: Act) -> tuple[Card, ...]:
    """The cards that made the pending Wild Draw Four illegal (``wd4.legal``); empty when it was legal."""
    s = act.state
    assert s.wd4 is not None
    return wd4_matching(s.wd4.hand, s.wd4.colour, s.options.wd4_wilds_block)


def accept(act: Act, victim: int) -> None:
    """``wd4.accept``: the victim draws 4 and loses the turn."""
    act.emit(Wd4Accepted(victim))
    act.take(victim, 4, Rule.WD4_ACCEPT)
    act.prompt(act.state.next_seat(victim))


def challenge(act: Act, victim: int, upheld: bool | None = None) -> None:
    """``wd4.challenge``: upheld, the offender draws 4 and the victim plays; failed, the victim draws 6.

    ``upheld`` overrides the judgement (a table that applied the wrong outcome, replayed as it was).
    """
    s = act.state
    assert s.wd4 is not None
    matching = pending_wd4_matching(act)
    if upheld is None:
        upheld = bool(matching)
    offender, hand, colour = s.wd4.offender, s.wd4.hand, s.wd4.colour
    act.emit(Wd4Challenged(victim, offender, upheld, hand, colour, matching))
    if upheld:
        act.take(offender, 4, Rule.WD4_CHALLENGE_UPHELD)
        act.prompt(victim)
    else:
        act.take(victim, 6, Rule.WD4_CHALLENGE_FAILED)
        act.prompt(act.state.next_seat(victim))


EFFECTS: dict[Face, Effect] = {
    **{face: next_turn for face in Face if face.number is not None},
    Face.SKIP: skip,
    Face.REVERSE: reverse,
    Face.DRAW_TWO: draw_two,
    Face.WILD: next_turn,
    Face.WILD_DRAW_FOUR: wild_draw_four,
}


def first_card(act: Act) -> None:
    """``setup.first-card`` for classic (and, through :func:`classic_start`, Mario Kart)."""
    classic_start(act, Variant.CLASSIC)


def classic_start(act: Act, variant: Variant) -> None:
    """Flip the first card and apply the classic first-card rules.

    W+4 → returned, the deck reshuffled, flip again. W (and Mario Kart's item box) → a colour is chosen:
    by the first player for W, by the dealer for the item box. +2 → the first player draws 2 and loses
    the turn. S → the first player loses the turn. R → the dealer plays first and play goes right.
    """
    s = act.state
    assert s.dealer is not None
    dealer = s.dealer
    first = s.next_seat(dealer)
    card = act.flip()
    while card is not None and card.face is Face.WILD_DRAW_FOUR:
        act.return_flip(card, anywhere=False)
        card = act.flip()
    face = card.face if card is not None else Face.ZERO
    if face is Face.WILD:
        act.prompt(first, Awaiting.COLOUR, pointer=first, new_turn=False)
    elif face is Face.WILD_ITEM_BOX and variant is Variant.MARIO_KART:
        act.prompt(dealer, Awaiting.COLOUR, pointer=first, new_turn=False)
    elif face is Face.DRAW_TWO:
        act.take(first, 2, Rule.ACTION_DRAW_TWO)
        act.prompt(act.state.next_seat(first))
    elif face is Face.SKIP:
        act.prompt(act.state.next_seat(first))
    elif face is Face.REVERSE:
        act.emit(DirectionReversed())
        act.prompt(dealer)
    else:
        act.prompt(first)
