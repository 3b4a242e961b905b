"""UNO Mario Kart: classic without plain wilds, plus the Wild Item Box and its five items."""

from __future__ import annotations

from service.rules import classic
from service.rules.cards import Colour, Face
from service.rules.engine import Act, Effect, Played
from service.rules.events import Awaiting
from service.rules.violations import Rule


def item_box(act: Act, played: Played) -> None:
    """``mk.item-box``: flip the top card of the draw pile; only its item happens, and the active colour
    becomes its colour. Going out, the item's effects on others still happen, but no extra turn
    (``round.end``) and no Bob-omb draw for the player who is out."""
    player = played.cmd.player
    flipped = act.flip()
    s = act.state
    after = s.next_seat(played.origin)
    if flipped is None:
        # Nothing left to flip anywhere: no item, and the box acts as a plain wild.
        if not played.going_out:
            act.prompt(player, Awaiting.COLOUR, pointer=after, new_turn=False)
        return
    if flipped.is_wild:  # Bob-omb
        if not played.going_out:
            act.take(player, 2, Rule.MK_ITEM_BOB_OMB)
            act.prompt(player, Awaiting.COLOUR, pointer=after, new_turn=False)
        return
    if flipped.colour is Colour.RED:  # Mushroom
        if not played.going_out:
            act.prompt(player)
    elif flipped.colour is Colour.YELLOW:  # Banana
        act.take(banana_victim(act, player), 2, Rule.MK_ITEM_BANANA)
        if not played.going_out:
            act.prompt(after)
    elif flipped.colour is Colour.GREEN:  # Green Shell
        target = played.cmd.target
        if target is not None:
            act.take(target, 1, Rule.MK_ITEM_GREEN_SHELL)
            if not played.going_out:
                act.prompt(after)
        else:
            act.prompt(player, Awaiting.TARGET, pointer=after, new_turn=False)
    else:  # Lightning
        for seat in act.others(played):
            act.take(seat, 1, Rule.MK_ITEM_LIGHTNING)
        if not played.going_out:
            act.prompt(player)


def banana_victim(act: Act, player: int) -> int:
    """Who slips on the Banana: the player who took the turn just before the item-box player's turn.

    The item-box player's own earlier turns (a Mushroom's extra turn) do not count; at the start of a
    round it is the previous seat in turn order (digest **[decision]**).
    """
    s = act.state
    if s.previous is not None and s.previous != player:
        return s.previous
    return s.next_seat(player, -1)


EFFECTS: dict[Face, Effect] = {**classic.EFFECTS, Face.WILD_ITEM_BOX: item_box}
del EFFECTS[Face.WILD]


def first_card(act: Act) -> None:
    """``setup.first-card`` for Mario Kart: as classic, but an item box lets the dealer choose the
    colour (no item), and a flipped card's item never activates at setup."""
    classic.first_card(act, dealer_chooses=Face.WILD_ITEM_BOX)
