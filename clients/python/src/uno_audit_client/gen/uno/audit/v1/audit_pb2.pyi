from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DisputeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DISPUTE_KIND_UNSPECIFIED: _ClassVar[DisputeKind]
    UNO_CATCH: _ClassVar[DisputeKind]
    WD4_CHALLENGE: _ClassVar[DisputeKind]
DISPUTE_KIND_UNSPECIFIED: DisputeKind
UNO_CATCH: DisputeKind
WD4_CHALLENGE: DisputeKind

class VerifyGameRequest(_message.Message):
    __slots__ = ("game_id", "reveal_seed", "command_id", "check_projections", "receipts")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    REVEAL_SEED_FIELD_NUMBER: _ClassVar[int]
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    CHECK_PROJECTIONS_FIELD_NUMBER: _ClassVar[int]
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    reveal_seed: bool
    command_id: str
    check_projections: bool
    receipts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, game_id: _Optional[str] = ..., reveal_seed: _Optional[bool] = ..., command_id: _Optional[str] = ..., check_projections: _Optional[bool] = ..., receipts: _Optional[_Iterable[str]] = ...) -> None: ...

class VerifyGameReply(_message.Message):
    __slots__ = ("valid", "rules_valid", "chain_valid", "first_tampered_position", "diverged_at", "outcome_differs", "report", "receipts_valid", "first_rewritten_version")
    VALID_FIELD_NUMBER: _ClassVar[int]
    RULES_VALID_FIELD_NUMBER: _ClassVar[int]
    CHAIN_VALID_FIELD_NUMBER: _ClassVar[int]
    FIRST_TAMPERED_POSITION_FIELD_NUMBER: _ClassVar[int]
    DIVERGED_AT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_DIFFERS_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    RECEIPTS_VALID_FIELD_NUMBER: _ClassVar[int]
    FIRST_REWRITTEN_VERSION_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    rules_valid: bool
    chain_valid: bool
    first_tampered_position: int
    diverged_at: int
    outcome_differs: bool
    report: _struct_pb2.Struct
    receipts_valid: bool
    first_rewritten_version: int
    def __init__(self, valid: _Optional[bool] = ..., rules_valid: _Optional[bool] = ..., chain_valid: _Optional[bool] = ..., first_tampered_position: _Optional[int] = ..., diverged_at: _Optional[int] = ..., outcome_differs: _Optional[bool] = ..., report: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., receipts_valid: _Optional[bool] = ..., first_rewritten_version: _Optional[int] = ...) -> None: ...

class AdjudicateRequest(_message.Message):
    __slots__ = ("game_id", "position", "by", "target")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    position: int
    by: int
    target: int
    def __init__(self, game_id: _Optional[str] = ..., position: _Optional[int] = ..., by: _Optional[int] = ..., target: _Optional[int] = ...) -> None: ...

class Ruling(_message.Message):
    __slots__ = ("kind", "verdict", "rule", "reason", "by", "against", "position", "recorded", "evidence", "mismatch")
    KIND_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    AGAINST_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    RECORDED_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    MISMATCH_FIELD_NUMBER: _ClassVar[int]
    kind: DisputeKind
    verdict: str
    rule: str
    reason: str
    by: str
    against: str
    position: int
    recorded: bool
    evidence: _struct_pb2.Struct
    mismatch: str
    def __init__(self, kind: _Optional[_Union[DisputeKind, str]] = ..., verdict: _Optional[str] = ..., rule: _Optional[str] = ..., reason: _Optional[str] = ..., by: _Optional[str] = ..., against: _Optional[str] = ..., position: _Optional[int] = ..., recorded: _Optional[bool] = ..., evidence: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., mismatch: _Optional[str] = ...) -> None: ...

class FileDisputeRequest(_message.Message):
    __slots__ = ("game_id", "command_id", "kind", "position", "target", "claim", "as_seat", "by")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    AS_SEAT_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    command_id: str
    kind: DisputeKind
    position: int
    target: int
    claim: str
    as_seat: int
    by: int
    def __init__(self, game_id: _Optional[str] = ..., command_id: _Optional[str] = ..., kind: _Optional[_Union[DisputeKind, str]] = ..., position: _Optional[int] = ..., target: _Optional[int] = ..., claim: _Optional[str] = ..., as_seat: _Optional[int] = ..., by: _Optional[int] = ...) -> None: ...

class Dispute(_message.Message):
    __slots__ = ("dispute_id", "game_id", "filed_at", "ruled_at", "seat", "kind", "position", "target", "claim", "status", "ruling", "note", "by")
    DISPUTE_ID_FIELD_NUMBER: _ClassVar[int]
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    FILED_AT_FIELD_NUMBER: _ClassVar[int]
    RULED_AT_FIELD_NUMBER: _ClassVar[int]
    SEAT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RULING_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    dispute_id: str
    game_id: str
    filed_at: int
    ruled_at: int
    seat: int
    kind: DisputeKind
    position: int
    target: int
    claim: str
    status: str
    ruling: Ruling
    note: str
    by: int
    def __init__(self, dispute_id: _Optional[str] = ..., game_id: _Optional[str] = ..., filed_at: _Optional[int] = ..., ruled_at: _Optional[int] = ..., seat: _Optional[int] = ..., kind: _Optional[_Union[DisputeKind, str]] = ..., position: _Optional[int] = ..., target: _Optional[int] = ..., claim: _Optional[str] = ..., status: _Optional[str] = ..., ruling: _Optional[_Union[Ruling, _Mapping]] = ..., note: _Optional[str] = ..., by: _Optional[int] = ...) -> None: ...

class RuleOnDisputeRequest(_message.Message):
    __slots__ = ("game_id", "dispute_id", "command_id", "note")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    DISPUTE_ID_FIELD_NUMBER: _ClassVar[int]
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    dispute_id: str
    command_id: str
    note: str
    def __init__(self, game_id: _Optional[str] = ..., dispute_id: _Optional[str] = ..., command_id: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class ListDisputesRequest(_message.Message):
    __slots__ = ("game_id", "status", "page_size", "page_token")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    status: str
    page_size: int
    page_token: str
    def __init__(self, game_id: _Optional[str] = ..., status: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListDisputesReply(_message.Message):
    __slots__ = ("disputes", "next_page_token")
    DISPUTES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    disputes: _containers.RepeatedCompositeFieldContainer[Dispute]
    next_page_token: str
    def __init__(self, disputes: _Optional[_Iterable[_Union[Dispute, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ExportGameRequest(_message.Message):
    __slots__ = ("game_id", "reveal_seed", "command_id")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    REVEAL_SEED_FIELD_NUMBER: _ClassVar[int]
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    reveal_seed: bool
    command_id: str
    def __init__(self, game_id: _Optional[str] = ..., reveal_seed: _Optional[bool] = ..., command_id: _Optional[str] = ...) -> None: ...

class ExportGameReply(_message.Message):
    __slots__ = ("record", "sha256")
    RECORD_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    record: str
    sha256: str
    def __init__(self, record: _Optional[str] = ..., sha256: _Optional[str] = ...) -> None: ...

class ImportRecordRequest(_message.Message):
    __slots__ = ("command_id", "record", "tournament_id")
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    command_id: str
    record: str
    tournament_id: str
    def __init__(self, command_id: _Optional[str] = ..., record: _Optional[str] = ..., tournament_id: _Optional[str] = ...) -> None: ...

class ImportSeat(_message.Message):
    __slots__ = ("seat", "player", "token")
    SEAT_FIELD_NUMBER: _ClassVar[int]
    PLAYER_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    seat: int
    player: str
    token: str
    def __init__(self, seat: _Optional[int] = ..., player: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...

class ImportRecordReply(_message.Message):
    __slots__ = ("game_id", "version", "seats", "report")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SEATS_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    version: int
    seats: _containers.RepeatedCompositeFieldContainer[ImportSeat]
    report: _struct_pb2.Struct
    def __init__(self, game_id: _Optional[str] = ..., version: _Optional[int] = ..., seats: _Optional[_Iterable[_Union[ImportSeat, _Mapping]]] = ..., report: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ReplayGameRequest(_message.Message):
    __slots__ = ("game_id", "as_seat")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    AS_SEAT_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    as_seat: int
    def __init__(self, game_id: _Optional[str] = ..., as_seat: _Optional[int] = ...) -> None: ...

class ReplayGameReply(_message.Message):
    __slots__ = ("html",)
    HTML_FIELD_NUMBER: _ClassVar[int]
    html: str
    def __init__(self, html: _Optional[str] = ...) -> None: ...
