"""The game record format ``uno-game-record/1``: a strict reader and a canonical writer.

A game record is the plain-text account of one game (``shared/RECORD.md``): JSON Lines, UTF-8, a header
line, then for every round a round line followed by that round's action lines. :func:`read_record` checks
that a record is well formed (not that its game keeps the rules: that is the verifier's job) and reports
anything else as a :class:`RecordError` naming the 1-based physical line (blank and ``#`` lines count).
:func:`write_record` writes the canonical form, which reads back equal. The typed model is in
:mod:`service.records.model`; what is checked and the canonical form: ``docs/DESIGN.md``, "Game records".
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any, NoReturn

from service.domain.limits import MAX_JSON_DEPTH, json_depth
from service.records.model import (
    FORMAT,
    Action,
    ActionKind,
    Fired,
    GameRecord,
    RecordError,
    RecordHeader,
    RoundBlock,
    RoundLine,
)
from service.rules.cards import Card, CardError, Colour, tokens
from service.rules.options import Variant, make_options
from service.rules.setup import MAX_NAME, valid_name
from service.rules.violations import Rule

# The model's names are imported from here by most callers: this module is the format's one entry point.
__all__ = [
    "FORMAT",
    "MAX_PLAYERS",
    "MIN_PLAYERS",
    "Action",
    "ActionKind",
    "Fired",
    "GameRecord",
    "RecordError",
    "RecordHeader",
    "RoundBlock",
    "RoundLine",
    "read_record",
    "read_record_file",
    "write_record",
]

#: The allowed number of players (digest ``setup.players``).
MIN_PLAYERS = 2
MAX_PLAYERS = 10


# --- Reading ---------------------------------------------------------------------------------------------

_HEADER_KEYS = ("record", "variant", "players", "options", "seed_sha256", "seed")
_ROUND_KEYS = ("round", "dealer", "fixed_by", "deck", "hands", "first", "cards", "fired", "reshuffle")
_ACTION_KEYS = tuple(kind.value for kind in ActionKind)
#: The keys each action may carry besides ``by`` and its action key, in canonical order.
_MODIFIERS: dict[ActionKind, tuple[str, ...]] = {
    ActionKind.PLAY: ("colour", "uno", "target", "jump_in", "flip", "cards", "fired", "reshuffle"),
    ActionKind.DRAW: ("cards", "reshuffle"),
    ActionKind.PASS: (),
    ActionKind.PRESS: ("fired", "reshuffle"),
    ActionKind.CALL_UNO: (),
    ActionKind.CATCH: ("applied", "cards", "fired", "reshuffle"),
    ActionKind.CHALLENGE: ("applied", "cards", "reshuffle"),
    ActionKind.ACCEPT: ("cards", "fired", "reshuffle"),
    ActionKind.CHOOSE: ("cards", "reshuffle"),
    ActionKind.RESHUFFLE: (),
}
_ACTION_LINE_KEYS = frozenset(("by", *_ACTION_KEYS, *(key for keys in _MODIFIERS.values() for key in keys)))
_ACTION_OF_KEY = {kind.value: kind for kind in ActionKind}
#: The keys a line of each action may hold (``by``, its action key, its modifiers).
_LINE_KEYS = {kind: frozenset(("by", kind.value, *_MODIFIERS[kind])) for kind in ActionKind}
#: The same, by the action's key (a string hashes in C; an enum member's hash is a Python call).
_LINE_KEYS_OF_KEY = {kind.value: keys for kind, keys in _LINE_KEYS.items()}
#: The ``applied`` values each action allows.
_APPLIED = {ActionKind.CATCH: ("penalty", "none"), ActionKind.CHALLENGE: ("upheld", "failed")}
#: Action keys whose only allowed value is ``true``.
_FLAG_ACTIONS = (ActionKind.DRAW, ActionKind.PASS, ActionKind.PRESS, ActionKind.CHALLENGE, ActionKind.ACCEPT)
_COLOURS = {colour.value: colour for colour in Colour}
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


def _json_type(value: Any) -> str:
    """How ``value`` is called in JSON, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    return "an array" if isinstance(value, list) else "an object"


class _JsonProblem(ValueError):
    """Raised by the JSON decoder hooks; becomes a :class:`RecordError` once the line is known."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _JsonProblem(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> NoReturn:
    raise _JsonProblem(f"invalid JSON: {name} is not a JSON number")


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
#: The decoder's C scanner (typeshed does not list it), and the whitespace JSON allows around a document.
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
_SPACE = " \t\n\r"


def _decode(line: str) -> Any:
    """``_DECODER.decode(line)``, without the two Python frames it spends around the C scanner on every
    line (the same value, the same errors)."""
    try:
        value, end = _SCAN(line, len(line) - len(line.lstrip(_SPACE)))
    except StopIteration as stop:
        raise json.JSONDecodeError("Expecting value", line, stop.value) from None
    if end != len(line):
        after = line[end:]
        end += len(after) - len(after.lstrip(_SPACE))
        if end != len(line):
            raise json.JSONDecodeError("Extra data", line, end)
    return value


def _physical_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines of ``text`` with their 1-based numbers, split at ``\\n`` only (JSON strings may hold
    other Unicode line separators), without a trailing ``\\r``."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the text ends with a newline: no line after it
    for number, line in enumerate(lines, start=1):
        yield number, line.removesuffix("\r")


class _Line:
    """What reading one line needs: its number, the header's players, how the round is dealt and
    whether the header reveals the game seed. (A plain class: one is made per line, and a frozen
    dataclass's constructor costs several times as much.)"""

    __slots__ = ("number", "players", "seeded", "with_deck")

    def __init__(self, number: int, players: tuple[str, ...], with_deck: bool, seeded: bool = False) -> None:
        self.number = number
        self.players = players
        self.with_deck = with_deck
        self.seeded = seeded

    def fail(self, message: str) -> NoReturn:
        raise RecordError(self.number, message)

    def check_keys(self, obj: dict[str, Any], allowed: Collection[str], what: str) -> None:
        for key in obj:
            if key not in allowed:
                self.fail(f"unknown key {key!r} on {what}")

    def player(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or value not in self.players:
            self.fail(f"{key!r} must name a player ({', '.join(self.players)}), not {_json_type(value)}")
        return value

    def card(self, value: Any, key: str) -> Card:
        if not isinstance(value, str):
            self.fail(f"{key!r} must be a card token, not {_json_type(value)}")
        try:
            return Card.parse(value)
        except CardError as error:
            self.fail(f"{error} in {key!r}")

    def cards(self, value: Any, key: str) -> tuple[Card, ...]:
        if not isinstance(value, list):
            self.fail(f"{key!r} must be a list of card tokens, not {_json_type(value)}")
        return tuple(self.card(item, key) for item in value)

    def per_player(self, value: Any, key: str) -> dict[str, tuple[Card, ...]]:
        if not isinstance(value, dict):
            self.fail(f"{key!r} must be an object of player → list of card tokens, not {_json_type(value)}")
        for name in value:
            if name not in self.players:
                self.fail(f"{key!r} names {name!r}, who is not a player ({', '.join(self.players)})")
        return {name: self.cards(listed, f"{key}.{name}") for name, listed in value.items()}

    def outcome(self, value: Any, key: str) -> Fired:
        if self.with_deck:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                self.fail(f"{key!r} must be a count of cards (a round with a deck), not {_json_type(value)}")
            return value
        if not isinstance(value, list):
            self.fail(
                f"{key!r} must be a list of card tokens (a round without a deck), not {_json_type(value)}"
            )
        return self.cards(value, key)

    def outcomes(self, value: Any, key: str) -> tuple[Fired, ...]:
        if not isinstance(value, list):
            self.fail(f"{key!r} must be a list with one entry per press, not {_json_type(value)}")
        return tuple(self.outcome(item, key) for item in value)

    def piles(self, value: Any) -> tuple[tuple[Card, ...], ...]:
        """A ``reshuffle`` modifier: one new pile (a list of card tokens) or several (a list of lists)."""
        if not isinstance(value, list) or not value:
            self.fail(
                f"'reshuffle' must be the new pile (a list of card tokens) or a list of such lists, "
                f"not {_json_type(value) if value != [] else 'an empty list'}"
            )
        if all(isinstance(item, list) for item in value):
            return tuple(self.cards(item, "reshuffle") for item in value)
        return (self.cards(value, "reshuffle"),)

    def listed(self, obj: dict[str, Any], drawer: str | None = None) -> dict[str, tuple[Card, ...]]:
        """The per-player ``cards`` of ``obj``: required in a round without a deck, optional with one.

        On a draw line (``drawer`` is the drawing player) a plain list is short for ``{drawer: list}``.
        """
        if "cards" not in obj:
            return {}
        if drawer is not None and isinstance(obj["cards"], list):
            return {drawer: self.cards(obj["cards"], "cards")}
        return self.per_player(obj["cards"], "cards")


def _load_object(number: int, line: str) -> dict[str, Any]:
    # Nothing nests deeper than it has opening brackets: most lines have a handful and need no scan.
    if line.count("[") + line.count("{") > MAX_JSON_DEPTH and json_depth(line) > MAX_JSON_DEPTH:
        raise RecordError(number, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = _decode(line)
    except json.JSONDecodeError as error:
        raise RecordError(number, f"invalid JSON: {error.msg} (column {error.colno})") from None
    except _JsonProblem as problem:
        raise RecordError(number, str(problem)) from None
    except ValueError:  # int() refuses a whole number of more digits than this bound (a DoS guard)
        digits = sys.get_int_max_str_digits()
        raise RecordError(number, f"invalid JSON: a number of more than {digits} digits") from None
    if not isinstance(value, dict):
        raise RecordError(number, f"expected a JSON object, not {_json_type(value)}")
    return value


def _read_header(number: int, obj: dict[str, Any]) -> RecordHeader:
    line = _Line(number, (), with_deck=False)
    if "record" not in obj:
        line.fail(f'the first line must be the header {{"record": "{FORMAT}", ...}}')
    line.check_keys(obj, _HEADER_KEYS, "the header")
    if obj["record"] != FORMAT:
        line.fail(f"unsupported 'record' {_json_type(obj['record'])} (expected {FORMAT!r})")
    if "variant" not in obj:
        line.fail("the header has no 'variant'")
    if not isinstance(obj["variant"], str):
        line.fail(f"'variant' must be a string, not {_json_type(obj['variant'])}")
    try:
        variant = Variant.parse(obj["variant"])
    except ValueError as error:  # OptionError
        line.fail(str(error))
    players = _read_players(line, obj.get("players"))
    options = obj.get("options", {})
    if not isinstance(options, dict):
        line.fail(f"'options' must be an object, not {_json_type(options)}")
    try:
        make_options(variant, options)
    except ValueError as error:  # OptionError, or anything else the options module rejects
        # ``setup.options``: an unknown option, a bad value, a house rule the rule set does not have. The
        # game cannot even be set up, so this is a read error (exit 2), named by its rule id.
        line.fail(f"{Rule.SETUP_OPTIONS.value}: {error}")
    seed_sha256 = obj.get("seed_sha256")
    if "seed_sha256" in obj:
        if not isinstance(seed_sha256, str) or not _SHA256.fullmatch(seed_sha256):
            line.fail(f"'seed_sha256' must be 64 hex digits, not {_json_type(seed_sha256)}")
        seed_sha256 = seed_sha256.lower()
    seed = None
    if "seed" in obj:
        if not isinstance(obj["seed"], str) or not _HEX.fullmatch(obj["seed"]):
            line.fail(f"'seed' must be a non-empty string of hex byte pairs, not {_json_type(obj['seed'])}")
        seed = bytes.fromhex(obj["seed"])
        if seed_sha256 is not None and hashlib.sha256(seed).hexdigest() != seed_sha256:
            line.fail(
                f"'seed' does not match 'seed_sha256': its SHA-256 is {hashlib.sha256(seed).hexdigest()}"
            )
    return RecordHeader(variant, players, options, seed_sha256, seed, number)


def _read_players(line: _Line, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not MIN_PLAYERS <= len(value) <= MAX_PLAYERS:
        described = f"{len(value)} players" if isinstance(value, list) else _json_type(value)
        line.fail(f"'players' must be a list of {MIN_PLAYERS} to {MAX_PLAYERS} names, not {described}")
    seen: set[str] = set()
    for name in value:
        if not isinstance(name, str) or not valid_name(name):
            line.fail(
                f"every player must be a name of 1 to {MAX_NAME} printable characters, not {_json_type(name)}"
            )
        if name in seen:
            line.fail(f"player {name!r} is listed twice in 'players'")
        seen.add(name)
    return tuple(value)


def _read_round(
    number: int, obj: dict[str, Any], players: tuple[str, ...], expected: int, committed: bool
) -> RoundLine:
    """A round line; ``committed``: the header commits to a seed (gives ``seed`` or ``seed_sha256``)."""
    line = _Line(number, players, with_deck="deck" in obj)
    line.check_keys(obj, _ROUND_KEYS, "a round line")
    value = obj["round"]
    if value != expected or isinstance(value, bool) or not isinstance(value, int):
        line.fail(
            f"expected round {expected}, not {_json_type(value)}: rounds are numbered 1, 2, 3… in order"
        )
    if "dealer" not in obj:
        line.fail("a round line needs a 'dealer'")
    dealer = line.player(obj["dealer"], "dealer")
    deck = hands = first = None
    if line.with_deck:
        if "hands" in obj or "first" in obj:
            line.fail("a round line gives either 'deck' or 'hands' and 'first', not both")
        deck = line.cards(obj["deck"], "deck")
    else:
        if "hands" not in obj or "first" not in obj:
            line.fail("a round line needs a 'deck', or 'hands' and 'first'")
        hands = line.per_player(obj["hands"], "hands")
        missing = [name for name in players if name not in hands]
        if missing:
            line.fail(f"'hands' must name every player; missing: {', '.join(missing)}")
        first = line.cards(obj["first"], "first")
        if not first:
            line.fail("'first' must list at least one card")
    fired = line.outcomes(obj["fired"], "fired") if "fired" in obj else ()
    if "reshuffle" in obj and not line.with_deck:
        line.fail("'reshuffle' on a round line (the pile after a returned first card) needs a 'deck'")
    reshuffles = line.piles(obj["reshuffle"]) if "reshuffle" in obj else ()
    fixed_by = _read_fixed_by(line, obj, committed)
    return RoundLine(
        expected, dealer, deck, hands, first, line.listed(obj), fired, number, reshuffles, fixed_by
    )


def _read_fixed_by(line: _Line, obj: dict[str, Any], committed: bool) -> str | None:
    """Who fixed the round's deck, when the line says it was not the seed's shuffle. Only a round with a
    deck, in a record that commits to a seed, can say so: elsewhere no seed deals, and there is nothing
    the deal would be exempt from."""
    if "fixed_by" not in obj:
        return None
    value = obj["fixed_by"]
    if not isinstance(value, str) or not valid_name(value):
        line.fail(
            f"'fixed_by' must be a name of 1 to {MAX_NAME} printable characters, not {_json_type(value)}"
        )
    if not line.with_deck:
        line.fail("'fixed_by' (the round was dealt from a fixed deck) needs the round's 'deck'")
    if not committed:
        line.fail("'fixed_by' says the seed did not deal the round, but the header commits to no seed")
    return value


def _read_action(
    number: int, obj: dict[str, Any], players: tuple[str, ...], with_deck: bool, seeded: bool
) -> Action:
    line = _Line(number, players, with_deck, seeded)
    keys = [key for key in obj if key in _ACTION_OF_KEY]
    # Most lines hold one action key and only keys that go with it (then also no unknown key): one
    # test; any other line is checked key by key, for the message.
    if len(keys) != 1 or not _LINE_KEYS_OF_KEY[keys[0]].issuperset(obj):
        keys = _check_action_keys(line, obj, keys)
    kind = _ACTION_OF_KEY[keys[0]]
    value = obj[keys[0]]
    if "by" in obj:
        by: str | None = line.player(obj["by"], "by")
    elif kind is ActionKind.RESHUFFLE:
        by = None
    else:
        line.fail(f"a {kind.value!r} line needs 'by', the acting player")
    if kind in _FLAG_ACTIONS and value is not True:
        line.fail(f"{kind.value!r} must be true, not {_json_type(value)}")
    if kind is ActionKind.CALL_UNO and value != "uno":
        line.fail(f"'call' must be \"uno\", not {_json_type(value)}")
    card = line.card(value, "play") if kind is ActionKind.PLAY else None
    colour = _read_colour(line, obj["colour"], "colour") if "colour" in obj else None
    target = line.player(obj["target"], "target") if "target" in obj else None
    if kind is ActionKind.CATCH:
        target = line.player(value, "catch")
    elif kind is ActionKind.CHOOSE:
        colour, target = _read_choice(line, value)
    uno = obj.get("uno", False)
    if not isinstance(uno, bool):
        line.fail(f"'uno' must be true or false, not {_json_type(uno)}")
    jump_in = obj.get("jump_in", False)
    if not isinstance(jump_in, bool):
        line.fail(f"'jump_in' must be true or false, not {_json_type(jump_in)}")
    applied = obj.get("applied")
    if "applied" in obj and applied not in _APPLIED[kind]:
        allowed = " or ".join(map(repr, _APPLIED[kind]))
        line.fail(f"'applied' on a {kind.value!r} line must be {allowed}, not {_json_type(applied)}")
    # The modifiers most lines do not have are read only when there (in this order, for which fails first).
    return Action(
        line=number,
        by=by,
        kind=kind,
        card=card,
        colour=colour,
        uno=uno,
        target=target,
        applied=applied,
        cards=line.listed(obj, drawer=by if kind is ActionKind.DRAW else None) if "cards" in obj else {},
        fired=_read_fired(line, obj, kind) if "fired" in obj or kind is ActionKind.PRESS else (),
        flip=_read_flip(line, obj) if "flip" in obj else None,
        pile=line.cards(value, "reshuffle") if kind is ActionKind.RESHUFFLE else None,
        reshuffles=_read_reshuffles(line, obj, kind) if "reshuffle" in obj else (),
        jump_in=jump_in,
    )


def _check_action_keys(line: _Line, obj: dict[str, Any], keys: list[str]) -> list[str]:
    """The action key of a line (``[key]``) whose keys are not simply one action's: a reshuffle with
    another action is a modifier of it; an unknown key, no or several action keys, or a key that does
    not go with the action fail the line."""
    line.check_keys(obj, _ACTION_LINE_KEYS, "an action line")
    if len(keys) > 1 and ActionKind.RESHUFFLE.value in keys:
        keys.remove(ActionKind.RESHUFFLE.value)  # a reshuffle inside another action: a modifier
    if len(keys) != 1:
        found = f"found {', '.join(map(repr, keys))}" if keys else "found none"
        line.fail(f"an action line needs exactly one action key ({', '.join(_ACTION_KEYS)}); {found}")
    kind = _ACTION_OF_KEY[keys[0]]
    line_keys = _LINE_KEYS[kind]
    for key in obj:
        if key not in line_keys:
            line.fail(f"key {key!r} does not go on a {kind.value!r} line")
    return keys


def _read_reshuffles(line: _Line, obj: dict[str, Any], kind: ActionKind) -> tuple[tuple[Card, ...], ...]:
    if kind is ActionKind.RESHUFFLE or "reshuffle" not in obj:
        return ()
    return line.piles(obj["reshuffle"])


def _read_colour(line: _Line, value: Any, key: str) -> Colour:
    if not isinstance(value, str) or value not in _COLOURS:
        line.fail(f"{key!r} must be one of {', '.join(_COLOURS)}, not {_json_type(value)}")
    return _COLOURS[value]


def _read_choice(line: _Line, value: Any) -> tuple[Colour | None, str | None]:
    if not isinstance(value, dict) or len(value) != 1 or not value.keys() <= {"colour", "target"}:
        line.fail(f'\'choose\' must be {{"colour": C}} or {{"target": PLAYER}}, not {json.dumps(value)}')
    if "colour" in value:
        return _read_colour(line, value["colour"], "choose.colour"), None
    return None, line.player(value["target"], "choose.target")


def _read_flip(line: _Line, obj: dict[str, Any]) -> Card | None:
    if "flip" not in obj:
        return None
    return line.card(obj["flip"], "flip")


def _read_fired(line: _Line, obj: dict[str, Any], kind: ActionKind) -> tuple[Fired, ...]:
    if kind is ActionKind.PRESS:
        if "fired" in obj:
            return (line.outcome(obj["fired"], "fired"),)
        if line.seeded:
            return ()  # the revealed seed decides the press
        line.fail(
            "a 'press' line needs 'fired' (how many cards came out, or which) unless the header has a seed"
        )
    return line.outcomes(obj["fired"], "fired") if "fired" in obj else ()


def read_record(text: str) -> GameRecord:
    """Read a whole record from ``text``; raises :class:`RecordError` if it is not well formed.

    Lines are split at ``\\n`` (a ``\\r`` before it is dropped); blank lines and lines whose first
    non-space character is ``#`` are skipped but counted. The first JSON line must be the header, then
    every action line must follow a round line.
    """
    header: RecordHeader | None = None
    rounds: list[RoundBlock] = []
    start: RoundLine | None = None
    actions: list[Action] = []
    last = 0
    for number, line in _physical_lines(text):
        last = number
        stripped = line.strip(" \t")
        if not stripped or stripped.startswith("#"):
            continue
        obj = _load_object(number, line)
        if header is None:
            header = _read_header(number, obj)
        elif "record" in obj:
            raise RecordError(number, "a header may only be the first line of a record")
        elif "round" in obj:
            if start is not None:
                rounds.append(RoundBlock(start, tuple(actions)))
            committed = header.seed is not None or header.seed_sha256 is not None
            start = _read_round(number, obj, header.players, len(rounds) + 1, committed)
            actions = []
        elif start is None:
            raise RecordError(number, "an action line before the first round line")
        else:
            with_deck, seeded = start.deck is not None, header.seed is not None
            actions.append(_read_action(number, obj, header.players, with_deck, seeded))
    if header is None:
        raise RecordError(last + 1, "the record has no header line")
    if start is not None:
        rounds.append(RoundBlock(start, tuple(actions)))
    return GameRecord(header, tuple(rounds))


def read_record_file(path: str | os.PathLike[str]) -> GameRecord:
    """Read the record in the file at ``path`` (UTF-8, an optional byte-order mark is skipped).

    Raises :class:`RecordError` for a malformed record or bytes that are not UTF-8 (naming the line they
    are on), and :class:`OSError` if the file cannot be read at all.
    """
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise RecordError(data.count(b"\n", 0, error.start) + 1, f"not UTF-8: {error.reason}") from None
    return read_record(text)


# --- Writing ---------------------------------------------------------------------------------------------


def _items(record: GameRecord) -> list[RecordHeader | RoundLine | Action]:
    """Everything ``record`` holds, one item per line of its canonical text, in order."""
    items: list[RecordHeader | RoundLine | Action] = [record.header]
    for block in record.rounds:
        items.append(block.start)
        items.extend(block.actions)
    return items


def _json_per_player(listed: dict[str, tuple[Card, ...]], players: tuple[str, ...]) -> dict[str, list[str]]:
    """``listed`` in seat order (names that are not players, which reading rejects, come last)."""
    order = [name for name in players if name in listed] + [name for name in listed if name not in players]
    return {name: tokens(listed[name]) for name in order}


def _json_outcome(outcome: Fired) -> int | list[str]:
    return outcome if isinstance(outcome, int) else tokens(outcome)


def _header_json(header: RecordHeader) -> dict[str, Any]:
    out: dict[str, Any] = {
        "record": FORMAT,
        "variant": header.variant.value,
        "players": list(header.players),
        "options": dict(sorted(header.options.items())),
    }
    if header.seed_sha256 is not None:
        out["seed_sha256"] = header.seed_sha256
    if header.seed is not None:
        out["seed"] = header.seed.hex()
    return out


def _round_json(start: RoundLine, players: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"round": start.round, "dealer": start.dealer}
    if start.fixed_by is not None:
        out["fixed_by"] = start.fixed_by
    if start.deck is not None:
        out["deck"] = tokens(start.deck)
    if start.hands is not None:
        out["hands"] = _json_per_player(start.hands, players)
    if start.first is not None:
        out["first"] = tokens(start.first)
    if start.cards:
        out["cards"] = _json_per_player(start.cards, players)
    if start.fired:
        out["fired"] = [_json_outcome(outcome) for outcome in start.fired]
    if start.reshuffles:
        out["reshuffle"] = _json_piles(start.reshuffles)
    return out


def _json_piles(piles: tuple[tuple[Card, ...], ...]) -> list[str] | list[list[str]]:
    """A ``reshuffle`` modifier: the one new pile, or the list of them."""
    return tokens(piles[0]) if len(piles) == 1 else [tokens(pile) for pile in piles]


def _action_value(action: Action) -> Any:
    """The value of the line's action key."""
    match action.kind:
        case ActionKind.PLAY:
            return None if action.card is None else action.card.token
        case ActionKind.CALL_UNO:
            return "uno"
        case ActionKind.CATCH:
            return action.target
        case ActionKind.CHOOSE:
            choice: dict[str, str] = {}
            if action.colour is not None:
                choice["colour"] = action.colour.value
            if action.target is not None:
                choice["target"] = action.target
            return choice
        case ActionKind.RESHUFFLE:
            return None if action.pile is None else tokens(action.pile)
        case _:
            return True


def _action_json(action: Action, players: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if action.by is not None:
        out["by"] = action.by
    out[action.kind.value] = _action_value(action)
    if action.colour is not None and action.kind is not ActionKind.CHOOSE:
        out["colour"] = action.colour.value
    if action.uno:
        out["uno"] = True
    if action.target is not None and action.kind not in (ActionKind.CATCH, ActionKind.CHOOSE):
        out["target"] = action.target
    if action.jump_in:
        out["jump_in"] = True
    if action.applied is not None:
        out["applied"] = action.applied
    if action.flip is not None:
        out["flip"] = action.flip.token
    if action.kind is ActionKind.DRAW and action.by is not None and list(action.cards) == [action.by]:
        out["cards"] = tokens(action.cards[action.by])
    elif action.cards:
        out["cards"] = _json_per_player(action.cards, players)
    if action.kind is ActionKind.PRESS:
        if action.fired:  # none: the seed decided the press (read back, only a seeded header allows it)
            out["fired"] = _json_outcome(action.fired[0]) if len(action.fired) == 1 else None
    elif action.fired:
        out["fired"] = [_json_outcome(outcome) for outcome in action.fired]
    if action.reshuffles:
        out["reshuffle"] = _json_piles(action.reshuffles)
    return out


def _to_json(item: RecordHeader | RoundLine | Action, players: tuple[str, ...]) -> dict[str, Any]:
    if isinstance(item, RecordHeader):
        return _header_json(item)
    if isinstance(item, RoundLine):
        return _round_json(item, players)
    return _action_json(item, players)


def write_record(record: GameRecord) -> str:
    """``record`` in canonical form (``docs/DESIGN.md``, "Game records"): a ``\\n``-ended line per object.

    The text is read back before it is returned, so what this function returns always reads back equal
    to ``record``. A model that is not a well-formed record raises :class:`RecordError`, numbered by the
    lines of the text that would have been written: either what reading that line reports (a ``by`` that
    is not a player, a play without a card, a press without exactly one outcome, ``cards`` in a round with
    a deck, …) or, for a value the format has no place for (a card on a draw, a tuple in ``options``, an
    upper-case ``seed_sha256``), that the line does not read back as the model has it.
    """
    items = _items(record)
    players = record.header.players
    text = "".join(json.dumps(_to_json(item, players), ensure_ascii=False) + "\n" for item in items)
    for number, (given, read) in enumerate(zip(items, _items(read_record(text)), strict=True), start=1):
        if given != read:
            raise RecordError(number, f"{FORMAT} cannot express {given!r}; it would read back as {read!r}")
    return text
