from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetCheckpointKeysRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CheckpointKey(_message.Message):
    __slots__ = ("name", "key_id", "verifier_key", "current")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_KEY_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    key_id: str
    verifier_key: str
    current: bool
    def __init__(self, name: _Optional[str] = ..., key_id: _Optional[str] = ..., verifier_key: _Optional[str] = ..., current: _Optional[bool] = ...) -> None: ...

class CheckpointKeys(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[CheckpointKey]
    def __init__(self, keys: _Optional[_Iterable[_Union[CheckpointKey, _Mapping]]] = ...) -> None: ...

class GetCheckpointRequest(_message.Message):
    __slots__ = ("game_id",)
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    def __init__(self, game_id: _Optional[str] = ...) -> None: ...

class GetTournamentCheckpointRequest(_message.Message):
    __slots__ = ("tournament_id",)
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    def __init__(self, tournament_id: _Optional[str] = ...) -> None: ...

class SignedCheckpoint(_message.Message):
    __slots__ = ("note", "origin", "size", "root_hash")
    NOTE_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    ROOT_HASH_FIELD_NUMBER: _ClassVar[int]
    note: str
    origin: str
    size: int
    root_hash: str
    def __init__(self, note: _Optional[str] = ..., origin: _Optional[str] = ..., size: _Optional[int] = ..., root_hash: _Optional[str] = ...) -> None: ...

class ProveGameRequest(_message.Message):
    __slots__ = ("tournament_id", "game_id", "size")
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    game_id: str
    size: int
    def __init__(self, tournament_id: _Optional[str] = ..., game_id: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...

class InclusionProof(_message.Message):
    __slots__ = ("tournament_id", "game_id", "version", "head_hash", "index", "size", "proof", "leaf_format", "variant", "players")
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    HEAD_HASH_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    LEAF_FORMAT_FIELD_NUMBER: _ClassVar[int]
    VARIANT_FIELD_NUMBER: _ClassVar[int]
    PLAYERS_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    game_id: str
    version: int
    head_hash: str
    index: int
    size: int
    proof: _containers.RepeatedScalarFieldContainer[str]
    leaf_format: int
    variant: str
    players: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tournament_id: _Optional[str] = ..., game_id: _Optional[str] = ..., version: _Optional[int] = ..., head_hash: _Optional[str] = ..., index: _Optional[int] = ..., size: _Optional[int] = ..., proof: _Optional[_Iterable[str]] = ..., leaf_format: _Optional[int] = ..., variant: _Optional[str] = ..., players: _Optional[_Iterable[str]] = ...) -> None: ...

class ProveConsistencyRequest(_message.Message):
    __slots__ = ("tournament_id", "old_size", "size")
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    OLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    old_size: int
    size: int
    def __init__(self, tournament_id: _Optional[str] = ..., old_size: _Optional[int] = ..., size: _Optional[int] = ...) -> None: ...

class ConsistencyProof(_message.Message):
    __slots__ = ("tournament_id", "old_size", "size", "proof")
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    OLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    old_size: int
    size: int
    proof: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tournament_id: _Optional[str] = ..., old_size: _Optional[int] = ..., size: _Optional[int] = ..., proof: _Optional[_Iterable[str]] = ...) -> None: ...

class CheckReceiptsRequest(_message.Message):
    __slots__ = ("game_id", "receipts")
    GAME_ID_FIELD_NUMBER: _ClassVar[int]
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    game_id: str
    receipts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, game_id: _Optional[str] = ..., receipts: _Optional[_Iterable[str]] = ...) -> None: ...

class ReceiptCheck(_message.Message):
    __slots__ = ("index", "version", "verdict", "message")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    index: int
    version: int
    verdict: str
    message: str
    def __init__(self, index: _Optional[int] = ..., version: _Optional[int] = ..., verdict: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class CheckReceiptsReply(_message.Message):
    __slots__ = ("valid", "checks")
    VALID_FIELD_NUMBER: _ClassVar[int]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    checks: _containers.RepeatedCompositeFieldContainer[ReceiptCheck]
    def __init__(self, valid: _Optional[bool] = ..., checks: _Optional[_Iterable[_Union[ReceiptCheck, _Mapping]]] = ...) -> None: ...
