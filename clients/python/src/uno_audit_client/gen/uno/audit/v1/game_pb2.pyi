import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Variant(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VARIANT_UNSPECIFIED: _ClassVar[Variant]
    CLASSIC: _ClassVar[Variant]
    SONIC: _ClassVar[Variant]
    ATTACK: _ClassVar[Variant]
    MARIO_KART: _ClassVar[Variant]
VARIANT_UNSPECIFIED: Variant
CLASSIC: Variant
SONIC: Variant
ATTACK: Variant
MARIO_KART: Variant

class CommandHeader(_message.Message):
    __slots__ = ("game_id", "command_id", "expected_version", "as_seat")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    AS_SEAT_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    command_id: str
    expected_version: int
    as_seat: int
    def __init__(self, game_id: _Optional[str] = ..., command_id: _Optional[str] = ..., expected_version: _Optional[int] = ..., as_seat: _Optional[int] = ...) -> None: ...

class CreateGameRequest(_message.Message):
    __slots__ = ("command_id", "variant", "players", "options", "target_score", "tournament_id", "dealer", "fixed_deck")
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    VARIANT_FIELD_NUMBER: _ClassVar[int]
    PLAYERS_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    TARGET_SCORE_FIELD_NUMBER: _ClassVar[int]
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    DEALER_FIELD_NUMBER: _ClassVar[int]
    FIXED_DECK_FIELD_NUMBER: _ClassVar[int]
    command_id: str
    variant: Variant
    players: _containers.RepeatedScalarFieldContainer[str]
    options: _struct_pb2.Struct
    target_score: int
    tournament_id: str
    dealer: int
    fixed_deck: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, command_id: _Optional[str] = ..., variant: _Optional[_Union[Variant, str]] = ..., players: _Optional[_Iterable[str]] = ..., options: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., target_score: _Optional[int] = ..., tournament_id: _Optional[str] = ..., dealer: _Optional[int] = ..., fixed_deck: _Optional[_Iterable[str]] = ...) -> None: ...

class SeatToken(_message.Message):
    __slots__ = ("seat", "player", "token")
    SEAT_FIELD_NUMBER: _ClassVar[int]
    PLAYER_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    seat: int
    player: str
    token: str
    def __init__(self, seat: _Optional[int] = ..., player: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...

class CreateGameReply(_message.Message):
    __slots__ = ("game_id", "version", "seats", "view", "receipt")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SEATS_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    version: int
    seats: _containers.RepeatedCompositeFieldContainer[SeatToken]
    view: GameView
    receipt: str
    def __init__(self, game_id: _Optional[str] = ..., version: _Optional[int] = ..., seats: _Optional[_Iterable[_Union[SeatToken, _Mapping]]] = ..., view: _Optional[_Union[GameView, _Mapping]] = ..., receipt: _Optional[str] = ...) -> None: ...

class StartRoundRequest(_message.Message):
    __slots__ = ("header", "fixed_deck")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    FIXED_DECK_FIELD_NUMBER: _ClassVar[int]
    header: CommandHeader
    fixed_deck: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, header: _Optional[_Union[CommandHeader, _Mapping]] = ..., fixed_deck: _Optional[_Iterable[str]] = ...) -> None: ...

class PlayRequest(_message.Message):
    __slots__ = ("header", "card", "colour", "uno", "target", "jump_in")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CARD_FIELD_NUMBER: _ClassVar[int]
    COLOUR_FIELD_NUMBER: _ClassVar[int]
    UNO_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    JUMP_IN_FIELD_NUMBER: _ClassVar[int]
    header: CommandHeader
    card: str
    colour: str
    uno: bool
    target: int
    jump_in: bool
    def __init__(self, header: _Optional[_Union[CommandHeader, _Mapping]] = ..., card: _Optional[str] = ..., colour: _Optional[str] = ..., uno: _Optional[bool] = ..., target: _Optional[int] = ..., jump_in: _Optional[bool] = ...) -> None: ...

class DrawRequest(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: CommandHeader
    def __init__(self, header: _Optional[_Union[CommandHeader, _Mapping]] = ...) -> None: ...

class PassRequest(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: CommandHeader
    def __init__(self, header: _Optional[_Union[CommandHeader, _Mapping]] = ...) -> None: ...

class PressRequest(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: CommandHeader
    def __init__(self, header: _Optional[_Union[CommandHeader, _Mapping]] = ...) -> None: ...

class CallUnoRequest(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: CommandHeader
    def __init__(self, header: _Optional[_Union[CommandHeader, _Mapping]] = ...) -> None: ...

class ChallengeRequest(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: CommandHeader
    def __init__(self, header: _Optional[_Union[CommandHeader, _Mapping]] = ...) -> None: ...

class AcceptRequest(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: CommandHeader
    def __init__(self, header: _Optional[_Union[CommandHeader, _Mapping]] = ...) -> None: ...

class CatchRequest(_message.Message):
    __slots__ = ("header", "target")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    header: CommandHeader
    target: int
    def __init__(self, header: _Optional[_Union[CommandHeader, _Mapping]] = ..., target: _Optional[int] = ...) -> None: ...

class ChooseRequest(_message.Message):
    __slots__ = ("header", "colour", "target")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    COLOUR_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    header: CommandHeader
    colour: str
    target: int
    def __init__(self, header: _Optional[_Union[CommandHeader, _Mapping]] = ..., colour: _Optional[str] = ..., target: _Optional[int] = ...) -> None: ...

class CommandReply(_message.Message):
    __slots__ = ("version", "events", "view", "duplicate", "receipt")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    version: int
    events: _containers.RepeatedCompositeFieldContainer[Event]
    view: GameView
    duplicate: bool
    receipt: str
    def __init__(self, version: _Optional[int] = ..., events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., view: _Optional[_Union[GameView, _Mapping]] = ..., duplicate: _Optional[bool] = ..., receipt: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("position", "version", "type", "payload", "recorded_at", "xid")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    XID_FIELD_NUMBER: _ClassVar[int]
    position: int
    version: int
    type: str
    payload: _struct_pb2.Struct
    recorded_at: _timestamp_pb2.Timestamp
    xid: int
    def __init__(self, position: _Optional[int] = ..., version: _Optional[int] = ..., type: _Optional[str] = ..., payload: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., xid: _Optional[int] = ...) -> None: ...

class Hand(_message.Message):
    __slots__ = ("seat", "cards")
    SEAT_FIELD_NUMBER: _ClassVar[int]
    CARDS_FIELD_NUMBER: _ClassVar[int]
    seat: int
    cards: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, seat: _Optional[int] = ..., cards: _Optional[_Iterable[str]] = ...) -> None: ...

class GameView(_message.Message):
    __slots__ = ("game_id", "variant", "players", "version", "awaiting", "round", "dealer", "turn", "direction", "top", "colour", "draw_pile", "discard_pile", "hand_sizes", "scores", "viewer_seat", "hands", "exposed", "winner", "seed_sha256", "tournament_id", "drawn", "exposed_seats", "pending_draw", "house_rules", "jumpable", "top_by")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    VARIANT_FIELD_NUMBER: _ClassVar[int]
    PLAYERS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    AWAITING_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    DEALER_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    TOP_FIELD_NUMBER: _ClassVar[int]
    COLOUR_FIELD_NUMBER: _ClassVar[int]
    DRAW_PILE_FIELD_NUMBER: _ClassVar[int]
    DISCARD_PILE_FIELD_NUMBER: _ClassVar[int]
    HAND_SIZES_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    VIEWER_SEAT_FIELD_NUMBER: _ClassVar[int]
    HANDS_FIELD_NUMBER: _ClassVar[int]
    EXPOSED_FIELD_NUMBER: _ClassVar[int]
    WINNER_FIELD_NUMBER: _ClassVar[int]
    SEED_SHA256_FIELD_NUMBER: _ClassVar[int]
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    DRAWN_FIELD_NUMBER: _ClassVar[int]
    EXPOSED_SEATS_FIELD_NUMBER: _ClassVar[int]
    PENDING_DRAW_FIELD_NUMBER: _ClassVar[int]
    HOUSE_RULES_FIELD_NUMBER: _ClassVar[int]
    JUMPABLE_FIELD_NUMBER: _ClassVar[int]
    TOP_BY_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    variant: Variant
    players: _containers.RepeatedScalarFieldContainer[str]
    version: int
    awaiting: str
    round: int
    dealer: int
    turn: int
    direction: int
    top: str
    colour: str
    draw_pile: int
    discard_pile: int
    hand_sizes: _containers.RepeatedScalarFieldContainer[int]
    scores: _containers.RepeatedScalarFieldContainer[int]
    viewer_seat: int
    hands: _containers.RepeatedCompositeFieldContainer[Hand]
    exposed: int
    winner: int
    seed_sha256: str
    tournament_id: str
    drawn: str
    exposed_seats: _containers.RepeatedScalarFieldContainer[int]
    pending_draw: int
    house_rules: _struct_pb2.Struct
    jumpable: bool
    top_by: int
    def __init__(self, game_id: _Optional[str] = ..., variant: _Optional[_Union[Variant, str]] = ..., players: _Optional[_Iterable[str]] = ..., version: _Optional[int] = ..., awaiting: _Optional[str] = ..., round: _Optional[int] = ..., dealer: _Optional[int] = ..., turn: _Optional[int] = ..., direction: _Optional[int] = ..., top: _Optional[str] = ..., colour: _Optional[str] = ..., draw_pile: _Optional[int] = ..., discard_pile: _Optional[int] = ..., hand_sizes: _Optional[_Iterable[int]] = ..., scores: _Optional[_Iterable[int]] = ..., viewer_seat: _Optional[int] = ..., hands: _Optional[_Iterable[_Union[Hand, _Mapping]]] = ..., exposed: _Optional[int] = ..., winner: _Optional[int] = ..., seed_sha256: _Optional[str] = ..., tournament_id: _Optional[str] = ..., drawn: _Optional[str] = ..., exposed_seats: _Optional[_Iterable[int]] = ..., pending_draw: _Optional[int] = ..., house_rules: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., jumpable: _Optional[bool] = ..., top_by: _Optional[int] = ...) -> None: ...

class GetGameRequest(_message.Message):
    __slots__ = ("game_id",)
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    def __init__(self, game_id: _Optional[str] = ...) -> None: ...

class ListGamesRequest(_message.Message):
    __slots__ = ("tournament_id", "page_size", "page_token")
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    page_size: int
    page_token: str
    def __init__(self, tournament_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class GameSummary(_message.Message):
    __slots__ = ("game_id", "variant", "players", "version", "tournament_id", "created_at")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    VARIANT_FIELD_NUMBER: _ClassVar[int]
    PLAYERS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    variant: Variant
    players: _containers.RepeatedScalarFieldContainer[str]
    version: int
    tournament_id: str
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, game_id: _Optional[str] = ..., variant: _Optional[_Union[Variant, str]] = ..., players: _Optional[_Iterable[str]] = ..., version: _Optional[int] = ..., tournament_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListGamesReply(_message.Message):
    __slots__ = ("games", "next_page_token")
    GAMES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    games: _containers.RepeatedCompositeFieldContainer[GameSummary]
    next_page_token: str
    def __init__(self, games: _Optional[_Iterable[_Union[GameSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchGameRequest(_message.Message):
    __slots__ = ("game_id", "after_version", "follow")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_VERSION_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    after_version: int
    follow: bool
    def __init__(self, game_id: _Optional[str] = ..., after_version: _Optional[int] = ..., follow: _Optional[bool] = ...) -> None: ...

class ProjectionCursor(_message.Message):
    __slots__ = ("xid", "position")
    XID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    xid: int
    position: int
    def __init__(self, xid: _Optional[int] = ..., position: _Optional[int] = ...) -> None: ...

class GetScoresRequest(_message.Message):
    __slots__ = ("game_id", "min_version")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_VERSION_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    min_version: int
    def __init__(self, game_id: _Optional[str] = ..., min_version: _Optional[int] = ...) -> None: ...

class SeatScore(_message.Message):
    __slots__ = ("seat", "player", "total")
    SEAT_FIELD_NUMBER: _ClassVar[int]
    PLAYER_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    seat: int
    player: str
    total: int
    def __init__(self, seat: _Optional[int] = ..., player: _Optional[str] = ..., total: _Optional[int] = ...) -> None: ...

class RoundScore(_message.Message):
    __slots__ = ("round", "winner", "points", "hands")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    WINNER_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    HANDS_FIELD_NUMBER: _ClassVar[int]
    round: int
    winner: int
    points: int
    hands: _containers.RepeatedCompositeFieldContainer[Hand]
    def __init__(self, round: _Optional[int] = ..., winner: _Optional[int] = ..., points: _Optional[int] = ..., hands: _Optional[_Iterable[_Union[Hand, _Mapping]]] = ...) -> None: ...

class GetScoresReply(_message.Message):
    __slots__ = ("game_id", "version", "status", "seats", "rounds")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SEATS_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    version: int
    status: str
    seats: _containers.RepeatedCompositeFieldContainer[SeatScore]
    rounds: _containers.RepeatedCompositeFieldContainer[RoundScore]
    def __init__(self, game_id: _Optional[str] = ..., version: _Optional[int] = ..., status: _Optional[str] = ..., seats: _Optional[_Iterable[_Union[SeatScore, _Mapping]]] = ..., rounds: _Optional[_Iterable[_Union[RoundScore, _Mapping]]] = ...) -> None: ...

class GetStandingsRequest(_message.Message):
    __slots__ = ("tournament_id", "min_cursor", "page_size", "page_token")
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_CURSOR_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    min_cursor: ProjectionCursor
    page_size: int
    page_token: str
    def __init__(self, tournament_id: _Optional[str] = ..., min_cursor: _Optional[_Union[ProjectionCursor, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class Standing(_message.Message):
    __slots__ = ("player", "games", "wins", "rounds_won", "points", "uno_penalties_given", "uno_penalties_taken", "challenges_won", "challenges_lost")
    PLAYER_FIELD_NUMBER: _ClassVar[int]
    GAMES_FIELD_NUMBER: _ClassVar[int]
    WINS_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_WON_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    UNO_PENALTIES_GIVEN_FIELD_NUMBER: _ClassVar[int]
    UNO_PENALTIES_TAKEN_FIELD_NUMBER: _ClassVar[int]
    CHALLENGES_WON_FIELD_NUMBER: _ClassVar[int]
    CHALLENGES_LOST_FIELD_NUMBER: _ClassVar[int]
    player: str
    games: int
    wins: int
    rounds_won: int
    points: int
    uno_penalties_given: int
    uno_penalties_taken: int
    challenges_won: int
    challenges_lost: int
    def __init__(self, player: _Optional[str] = ..., games: _Optional[int] = ..., wins: _Optional[int] = ..., rounds_won: _Optional[int] = ..., points: _Optional[int] = ..., uno_penalties_given: _Optional[int] = ..., uno_penalties_taken: _Optional[int] = ..., challenges_won: _Optional[int] = ..., challenges_lost: _Optional[int] = ...) -> None: ...

class GetStandingsReply(_message.Message):
    __slots__ = ("tournament_id", "cursor", "standings", "next_page_token")
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    STANDINGS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    cursor: ProjectionCursor
    standings: _containers.RepeatedCompositeFieldContainer[Standing]
    next_page_token: str
    def __init__(self, tournament_id: _Optional[str] = ..., cursor: _Optional[_Union[ProjectionCursor, _Mapping]] = ..., standings: _Optional[_Iterable[_Union[Standing, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetHandRequest(_message.Message):
    __slots__ = ("game_id", "seat", "min_version")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    SEAT_FIELD_NUMBER: _ClassVar[int]
    MIN_VERSION_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    seat: int
    min_version: int
    def __init__(self, game_id: _Optional[str] = ..., seat: _Optional[int] = ..., min_version: _Optional[int] = ...) -> None: ...

class GetHandReply(_message.Message):
    __slots__ = ("game_id", "seat", "version", "cards")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    SEAT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CARDS_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    seat: int
    version: int
    cards: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, game_id: _Optional[str] = ..., seat: _Optional[int] = ..., version: _Optional[int] = ..., cards: _Optional[_Iterable[str]] = ...) -> None: ...

class GetProjectionLagRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QuarantinedGame(_message.Message):
    __slots__ = ("game_id", "version", "position", "cause", "reason", "quarantined_at")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    QUARANTINED_AT_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    version: int
    position: int
    cause: str
    reason: str
    quarantined_at: _timestamp_pb2.Timestamp
    def __init__(self, game_id: _Optional[str] = ..., version: _Optional[int] = ..., position: _Optional[int] = ..., cause: _Optional[str] = ..., reason: _Optional[str] = ..., quarantined_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ProjectionLagReply(_message.Message):
    __slots__ = ("events_behind", "seconds_behind", "checkpoint", "quarantined", "quarantined_total", "failing", "failing_reason", "failing_since")
    EVENTS_BEHIND_FIELD_NUMBER: _ClassVar[int]
    SECONDS_BEHIND_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    QUARANTINED_FIELD_NUMBER: _ClassVar[int]
    QUARANTINED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    FAILING_FIELD_NUMBER: _ClassVar[int]
    FAILING_REASON_FIELD_NUMBER: _ClassVar[int]
    FAILING_SINCE_FIELD_NUMBER: _ClassVar[int]
    events_behind: int
    seconds_behind: float
    checkpoint: ProjectionCursor
    quarantined: _containers.RepeatedCompositeFieldContainer[QuarantinedGame]
    quarantined_total: int
    failing: bool
    failing_reason: str
    failing_since: _timestamp_pb2.Timestamp
    def __init__(self, events_behind: _Optional[int] = ..., seconds_behind: _Optional[float] = ..., checkpoint: _Optional[_Union[ProjectionCursor, _Mapping]] = ..., quarantined: _Optional[_Iterable[_Union[QuarantinedGame, _Mapping]]] = ..., quarantined_total: _Optional[int] = ..., failing: _Optional[bool] = ..., failing_reason: _Optional[str] = ..., failing_since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
