"""The commands on signed checkpoints: ``keygen``, ``checkpoint`` (sign a game's head or a tournament's
tree), ``prove``, ``check-proof`` (published checkpoints only: no database, no server) and ``cosign``
(a witness's signature); and the key and file readers ``verify --receipts`` shares.

The signing key is ``--key-file``, else ``$UNO_AUDIT_CHECKPOINT_KEY``, else the one ``serve`` keeps in its
data folder; the service's name in every origin is the key's name. Exit 0 when done or valid, 1 when a
proof does not hold, 2 when the request cannot be carried out (no key, an unreadable file, an unknown
game or tournament).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from service.checkpoints import (
    KEY_ENV,
    CheckpointError,
    GameInclusion,
    KeyFormatError,
    NoteError,
    NoteVerificationError,
    ProofError,
    Signer,
    TournamentLeaf,
    Verifier,
    cosign,
    game_checkpoint,
    load_signer,
    open_checkpoint,
    prove_game,
    signer_from_environment,
    tournament_checkpoint,
    tournament_tree,
    verify_consistency,
    verify_game_in_tournament,
    write_signer,
)
from service.checkpoints.tournament import tournament_origin
from service.cli.database import on_auditor
from service.cli.exits import EXIT_INVALID, EXIT_OK, EXIT_USAGE, Refused
from service.cli.options import stored_games_database
from service.cli.tournaments import tournament_name

#: The key ``serve`` signs with when none is named, made on its first start in its data folder.
SERVE_KEY_FILE = "checkpoint.key"
#: A checkpoint or proof file is small; anything larger is not one.
MAX_FILE_BYTES = 1 << 20
#: A receipts file: a long match's every receipt (a few hundred bytes each, 100,000 at most).
MAX_RECEIPTS_FILE_BYTES = 64 << 20


def register_keygen(commands: Any) -> None:
    """The ``keygen`` command."""
    keygen = commands.add_parser("keygen", help="make a checkpoint signing key; print its public key")
    keygen.add_argument("--name", required=True, help="the key's name: the service's, as in its origins")
    keygen.add_argument("--out", type=Path, required=True, metavar="FILE", help="the private key (0600)")
    keygen.add_argument("--force", action="store_true", help="replace FILE if it exists")
    keygen.set_defaults(run=keygen_command)


def register(commands: Any) -> None:
    """The ``checkpoint``, ``prove``, ``check-proof`` and ``cosign`` commands."""
    checkpoint = commands.add_parser("checkpoint", help="sign a game's or a tournament's checkpoint")
    which = checkpoint.add_mutually_exclusive_group(required=True)
    which.add_argument("--game", metavar="ID", help="a stored game: its current head")
    which.add_argument(
        "--tournament", type=tournament_name, metavar="T", help="a tournament: the tree of its finished games"
    )
    checkpoint.add_argument(
        "--key-file",
        type=Path,
        metavar="FILE",
        help=f"the signing key (else ${KEY_ENV}, else the key serve keeps: DATA_DIR/{SERVE_KEY_FILE})",
    )
    checkpoint.add_argument("--json", action="store_true", help="print one JSON object")
    stored_games_database(checkpoint)
    checkpoint.set_defaults(run=checkpoint_command)

    prove = commands.add_parser("prove", help="prove a game is in a tournament, or that it only grew")
    prove.add_argument(
        "--tournament", type=tournament_name, metavar="T", help="the tournament (default: the game's)"
    )
    what = prove.add_mutually_exclusive_group(required=True)
    what.add_argument("--game", metavar="ID", help="an inclusion proof of this game")
    what.add_argument("--from-size", type=int, metavar="M", help="a consistency proof from size M")
    prove.add_argument("--size", type=int, metavar="N", help="the tree size to prove against (default: now)")
    stored_games_database(prove)
    prove.set_defaults(run=prove_command)

    check = commands.add_parser("check-proof", help="check a proof against published checkpoints only")
    check.add_argument("--checkpoint", type=Path, required=True, metavar="FILE", help="the signed checkpoint")
    check.add_argument("--proof", type=Path, required=True, metavar="FILE", help="the proof (JSON)")
    check.add_argument("--old-checkpoint", type=Path, metavar="FILE", help="the earlier checkpoint")
    check.add_argument(
        "--leaf",
        type=Path,
        metavar="FILE",
        help="a published site's leaves/NNN.json: also rebuild the game's result from the row it ended at",
    )
    _key_options(check)
    check.set_defaults(run=_check_proof)

    witness = commands.add_parser("cosign", help="a witness co-signs a checkpoint it checked")
    witness.add_argument(
        "--checkpoint", type=Path, required=True, metavar="FILE", help="the signed checkpoint"
    )
    witness.add_argument("--key-file", type=Path, required=True, metavar="FILE", help="the witness's key")
    witness.add_argument(
        "--log-key", action="append", required=True, metavar="VKEY", help="the service's verifier key"
    )
    witness.set_defaults(run=_cosign)


def _key_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--key",
        action="append",
        required=True,
        metavar="VKEY",
        help="a published verifier key of the service",
    )
    parser.add_argument("--witness", action="append", default=[], metavar="VKEY", help="a trusted witness")
    parser.add_argument("--threshold", type=int, default=0, metavar="K", help="witness signatures required")


def checkpoint_command(args: argparse.Namespace) -> int:
    """Sign and print the checkpoint of a stored game's head or of a tournament's tree."""
    signer = signing_key(args.key_file, args.data_dir)
    return on_auditor(args, lambda auditor: _checkpoint(auditor.store, signer, args))


def prove_command(args: argparse.Namespace) -> int:
    """Print an inclusion or a consistency proof as one JSON object."""
    return on_auditor(args, lambda auditor: _prove(auditor.store, args))


def keygen_command(args: argparse.Namespace) -> int:
    """Make an Ed25519 key for signing checkpoints, write it to ``--out`` (mode 0600; an existing file
    only with ``--force``) and print its public verifier key and key id, to publish, as one JSON object.
    """
    try:
        signer = Signer.generate(args.name)
        write_signer(signer, args.out, force=args.force)
    except KeyFormatError as error:
        print(f"uno-audit keygen: {error}", file=sys.stderr)
        return EXIT_USAGE
    except FileExistsError:
        print(f"uno-audit keygen: {args.out} exists (--force replaces the key in it)", file=sys.stderr)
        return EXIT_USAGE
    except OSError as error:
        print(f"uno-audit keygen: cannot write {args.out}: {error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    key = {"name": signer.name, "key_id": f"{signer.key_id:08x}", "verifier_key": signer.verifier.encode()}
    print(json.dumps({**key, "key_file": str(args.out)}))
    return EXIT_OK


def signing_key(path: Path | None, data_dir: Path | None = None) -> Signer:
    """The checkpoint signing key from ``path``, else from ``$UNO_AUDIT_CHECKPOINT_KEY``, else (given a
    ``data_dir``) the key ``serve`` makes and keeps there, ``DATA_DIR/checkpoint.key``; :class:`Refused`
    (exit 2) when there is none."""
    kept = None if data_dir is None else data_dir / SERVE_KEY_FILE
    try:
        if path is not None:
            signer: Signer | None = load_signer(path)
        else:
            signer = signer_from_environment()
            if signer is None and kept is not None and kept.exists():
                signer = load_signer(kept)
    except (OSError, KeyFormatError) as error:
        raise Refused(f"the signing key: {error}") from None
    if signer is None:
        serves = (
            "" if kept is None else f", or run `uno-audit serve --data-dir {data_dir}` once (it makes {kept})"
        )
        raise Refused(
            f"no signing key: give --key-file or set ${KEY_ENV}{serves}; uno-audit keygen makes one"
        )
    return signer


def verifiers(keys: list[str], what: str = "--key") -> list[Verifier]:
    """Published verifier keys, parsed; :class:`Refused` naming a bad one."""
    try:
        return [Verifier.parse(key) for key in keys]
    except KeyFormatError as error:
        raise Refused(f"{what}: {error}") from None


def read_small(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """A checkpoint, proof or receipts file's text; :class:`Refused` if it cannot be read or is larger
    than ``limit`` bytes."""
    try:
        with path.open("rb") as file:
            data = file.read(limit + 1)
    except OSError as error:
        raise Refused(f"cannot read {path}: {error.strerror or error}") from None
    if len(data) > limit:
        raise Refused(f"{path} is larger than {limit} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(f"{path} is not UTF-8 text") from None


async def _checkpoint(store: Any, signer: Signer, args: argparse.Namespace) -> int:
    from service.audit.tournaments import ChainBroken, UnknownTournament, game_head, tournament_leaves

    try:
        if args.game is not None:
            if await store.stream_version(args.game) == 0:
                raise Refused(f"no game {args.game!r}")
            head = await game_head(store, args.game)
            checkpoint = game_checkpoint(signer.name, args.game, head.version, head.head)
        else:
            leaves = await tournament_leaves(store, args.tournament)
            checkpoint = tournament_checkpoint(signer.name, args.tournament, leaves)
    except ChainBroken as broken:
        raise Refused(f"{broken}; verify the game before signing anything") from None
    except UnknownTournament as unknown:
        raise Refused(str(unknown)) from None
    note = checkpoint.sign(signer)
    if args.json:
        print(
            json.dumps(
                {
                    "origin": checkpoint.origin,
                    "size": checkpoint.size,
                    "root_hash": checkpoint.root_hash.hex(),
                    "note": note,
                },
                ensure_ascii=False,
            )
        )
    else:
        sys.stdout.write(note)
    return EXIT_OK


async def _prove(store: Any, args: argparse.Namespace) -> int:
    from service.audit.tournaments import ChainBroken, UnknownTournament, tournament_leaves

    if args.tournament is None:
        if args.game is None:
            raise Refused("a consistency proof needs --tournament")
        game = await store.game(args.game)
        if game is None:
            raise Refused(f"no game {args.game!r}")
        if not game.tournament_id:
            raise Refused(f"game {args.game} is in no tournament")
        args.tournament = game.tournament_id
    try:
        leaves = await tournament_leaves(store, args.tournament)
    except (ChainBroken, UnknownTournament) as refused:
        raise Refused(str(refused)) from None
    size = len(leaves) if args.size is None else args.size
    if not 0 < size <= len(leaves):
        raise Refused(f"the tournament has {len(leaves)} finished games; --size must be 1 to {len(leaves)}")
    if args.game is not None:
        try:
            inclusion = prove_game(leaves, args.game, size)
        except KeyError:
            raise Refused(
                f"{args.game} is not among the first {size} finished games of the tournament"
            ) from None
        print(json.dumps(inclusion_to_json(args.tournament, inclusion)))
        return EXIT_OK
    if not 0 < args.from_size <= size:
        raise Refused(f"--from-size must be 1 to {size}")
    proof = tournament_tree(leaves).consistency_proof(args.from_size, size)
    print(json.dumps(consistency_to_json(args.tournament, args.from_size, size, proof)))
    return EXIT_OK


def consistency_to_json(
    tournament_id: str, old_size: int, size: int, proof: Sequence[bytes]
) -> dict[str, Any]:
    """A consistency proof as the JSON ``prove --from-size`` prints and ``check-proof`` reads (``publish``
    writes it as its site's ``consistency.json``)."""
    return {
        "kind": "consistency",
        "tournament": tournament_id,
        "old_size": old_size,
        "size": size,
        "proof": [step.hex() for step in proof],
    }


def inclusion_to_json(tournament_id: str, inclusion: GameInclusion) -> dict[str, Any]:
    """An inclusion proof as the JSON ``prove`` prints and ``check-proof`` reads."""
    return {
        "kind": "inclusion",
        "tournament": tournament_id,
        "leaf": inclusion.leaf.to_json(),
        "index": inclusion.index,
        "size": inclusion.size,
        "proof": [step.hex() for step in inclusion.proof],
    }


def _hashes(value: Any) -> tuple[bytes, ...]:
    if not isinstance(value, list) or len(value) > 64:
        raise ValueError("'proof' is a list of at most 64 hex hashes")
    return tuple(bytes.fromhex(step) for step in value)


def _check_proof(args: argparse.Namespace) -> int:
    keys = verifiers(args.key)
    witnesses = verifiers(args.witness, "--witness")
    try:
        proof = json.loads(read_small(args.proof))
        if not isinstance(proof, dict) or proof.get("kind") not in ("inclusion", "consistency"):
            raise ValueError("the proof is a JSON object whose 'kind' is inclusion or consistency")
        tournament = proof["tournament"]
        if not isinstance(tournament, str):
            raise ValueError("'tournament' is a string")
        receipt = open_checkpoint(
            read_small(args.checkpoint), keys, witnesses=witnesses, threshold=args.threshold
        )
        service = receipt.log_signatures[0].name
        if proof["kind"] == "inclusion":
            inclusion = GameInclusion(
                TournamentLeaf.from_json(proof["leaf"]),
                proof["index"],
                proof["size"],
                _hashes(proof["proof"]),
            )
            verify_game_in_tournament(receipt, inclusion, service=service, tournament_id=tournament)
            result = None if args.leaf is None else _leaf_result(args.leaf, inclusion.leaf)
            print(f"game {inclusion.leaf.game_id} is game {inclusion.index + 1} of the {receipt.size} signed")
            if inclusion.leaf.players is not None:
                seats = ", ".join(f"{seat} {name}" for seat, name in enumerate(inclusion.leaf.players))
                print(f"  {inclusion.leaf.variant}, players by seat: {seats}")
            if result is not None:
                scores = ", ".join(f"{name} {total}" for name, total in result["scores"])
                print(f"  result (from the row it ended at): {result['winner']} won ({scores})")
            return EXIT_OK
        if args.old_checkpoint is None:
            raise Refused("a consistency proof is checked against --old-checkpoint and --checkpoint")
        old = open_checkpoint(
            read_small(args.old_checkpoint), keys, witnesses=witnesses, threshold=args.threshold
        )
        origin = tournament_origin(service, tournament)
        if old.origin != origin or receipt.origin != origin:
            raise CheckpointError(f"both checkpoints must be of {origin!r}")
        if (old.size, receipt.size) != (proof["old_size"], proof["size"]):
            raise CheckpointError("the proof's sizes are not the checkpoints'")
        verify_consistency(old.size, receipt.size, _hashes(proof["proof"]), old.root_hash, receipt.root_hash)
        print(f"the tournament's {receipt.size} games begin with the {old.size} signed before")
        return EXIT_OK
    except (ProofError, CheckpointError, NoteVerificationError, NoteError) as failed:
        print(f"uno-audit check-proof: INVALID: {failed}")
        return EXIT_INVALID
    except (ValueError, KeyError, TypeError) as bad:
        raise Refused(f"unreadable proof: {bad}") from None


def _leaf_result(path: Path, leaf: TournamentLeaf) -> dict[str, Any]:
    """The result a site's leaf file binds to ``leaf`` (the proof's, checked): its inputs must be the
    proof's, and its row must hash to the head; :class:`CheckpointError` otherwise."""
    from service.audit.site import signed_result

    given = json.loads(read_small(path))
    if not isinstance(given, dict):
        raise ValueError(f"{path} is not a leaf file")
    inputs = {key: value for key, value in given.items() if key not in ("leaf", "leaf_hash", "end")}
    if TournamentLeaf.from_json(inputs) != leaf:
        raise CheckpointError(f"{path} is not the leaf of the proof (its game, version, head or players)")
    if given.get("leaf") != leaf.encode().hex() or given.get("leaf_hash") != leaf.hash().hex():
        raise CheckpointError(f"{path}: its leaf bytes or leaf hash are not its inputs'")
    if given.get("end") is None:
        raise CheckpointError(f"{path} binds no result (an imported game's leaf is its last record line)")
    try:
        return signed_result(leaf, given["end"])
    except ValueError as bad:
        raise CheckpointError(f"{path}: {bad}") from None


def _cosign(args: argparse.Namespace) -> int:
    logs = verifiers(args.log_key, "--log-key")
    witness = signing_key(args.key_file)
    try:
        sys.stdout.write(cosign(read_small(args.checkpoint), witness, logs))
    except (NoteError, NoteVerificationError) as refused:
        raise Refused(f"not co-signed: {refused}") from None
    return EXIT_OK
