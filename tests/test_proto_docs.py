"""docs/API.md, the proto reference protos/docs.py renders: current, complete, and fed by the comments."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import grpc
from google.protobuf.descriptor import FileDescriptor

from uno_audit_client.gen.uno.audit.v1 import audit_pb2, game_pb2

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "protos" / "docs.py"
API_MD = ROOT / "docs" / "API.md"


def load_docs() -> ModuleType:
    """protos/ is no package: the script is loaded from its path."""
    spec = importlib.util.spec_from_file_location("proto_docs", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def section(text: str, heading: str) -> str:
    """The Markdown from ``heading`` to the next heading of any level."""
    start = text.index(f"\n{heading}\n")
    following = re.search(r"\n#+ ", text[start + len(heading) + 2 :])
    return text[start : start + len(heading) + 2 + following.start()] if following else text[start:]


def cells(row: str) -> list[str]:
    """A table row's cells, split at the pipes that are not escaped."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def row_of(text: str, heading: str, name: str) -> list[str]:
    rows = [r for r in section(text, heading).splitlines() if r.startswith(f"| `{name}` |")]
    assert len(rows) == 1, (heading, name, rows)
    return cells(rows[0])


def test_the_committed_reference_is_current() -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr


def test_every_service_rpc_message_field_and_enum_value_is_listed() -> None:
    """Checked against the generated code's descriptors, not the renderer's own compilation."""
    text = API_MD.read_text()
    files: list[FileDescriptor] = [game_pb2.DESCRIPTOR, audit_pb2.DESCRIPTOR]
    for f in files:
        for service in f.services_by_name.values():
            for method in service.methods:
                assert row_of(text, f"### {service.name}", method.name)[1].endswith(
                    f"[{method.input_type.name}](#{method.input_type.name.lower()})"
                )
        for message in f.message_types_by_name.values():
            for field in message.fields:
                assert row_of(text, f"#### {message.name}", field.name)[1] == str(field.number)
        for enum in f.enum_types_by_name.values():
            for value in enum.values:
                assert row_of(text, f"#### {enum.name}", value.name)[1] == str(value.number)


def test_a_comment_pipe_stays_in_its_cell() -> None:
    verdict = row_of(API_MD.read_text(), "#### Ruling", "verdict")
    assert len(verdict) == 4
    assert verdict[3] == r"penalty \| no-penalty (a catch), upheld \| failed (a challenge)."


def test_an_edited_comment_reaches_its_row_and_the_check_sees_the_drift(tmp_path: Path) -> None:
    protos = tmp_path / "protos"
    shutil.copytree(ROOT / "protos", protos, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    game = protos / "uno" / "audit" / "v1" / "game.proto"
    source = game.read_text()
    assert source.count("  int32 draw_pile = 12;\n") == 1
    game.write_text(
        source.replace(
            "  int32 draw_pile = 12;\n",
            "  // Cards left to draw | none hidden.\n  int32 draw_pile = 12;  // Public.\n",
        )
    )
    docs = load_docs()
    edited = docs.render(docs.compile_protos(protos))
    assert row_of(edited, "#### GameView", "draw_pile") == [
        "`draw_pile`",
        "12",
        "`int32`",
        r"Cards left to draw \| none hidden. Public.",
    ]
    assert edited != API_MD.read_text()
    assert docs.render(docs.compile_protos(ROOT / "protos")) == API_MD.read_text()


#: The code of each service's refusals, whose ``reason="…"`` arguments its list in docs/API.md must hold:
#: the servicer, the application under it, the write loop, and the gRPC edge every service shares.
REFUSING = {
    "AuditService": [
        "service/api/audit_servicer.py",
        "service/app/auditor.py",
        "service/app/runner.py",
        "service/api/errors.py",
    ],
    "CheckpointService": ["service/api/checkpoint_servicer.py", "service/api/errors.py"],
}
#: A reason of the shared write loop no request of the service can meet: only a request naming the
#: version it expects is refused VERSION_CONFLICT, and no AuditService request names one; only a write is
#: refused NOT_REPLICATED, and CheckpointService writes nothing.
NOT_MET = {"AuditService": {"VERSION_CONFLICT"}, "CheckpointService": {"NOT_REPLICATED"}}
REASON = re.compile(r'\breason="([A-Z][A-Z0-9_]*)"')
LISTED = re.compile(r"^- `([A-Z][A-Z0-9_]*)` \(([A-Z_]+)\): ", re.M)


def documented_reasons(service: str) -> dict[str, str]:
    """The reasons listed in the service's section of docs/API.md, each with its status code."""
    return dict(LISTED.findall(section(API_MD.read_text(), f"### {service}")))


def test_every_reason_the_audit_and_checkpoint_services_raise_is_listed() -> None:
    for service, paths in REFUSING.items():
        raised = {reason for path in paths for reason in REASON.findall((ROOT / path).read_text())}
        assert {"UNKNOWN_GAME", "INTERNAL"} <= raised, (service, raised)  # the pattern still finds them
        listed = documented_reasons(service)
        missing = sorted(raised - NOT_MET[service] - set(listed))
        assert not missing, f"{service} raises reasons docs/API.md does not list: {missing}"


def test_the_listed_reasons_name_their_status_codes() -> None:
    codes = {code.name for code in grpc.StatusCode}
    for service in REFUSING:
        listed = documented_reasons(service)
        assert {"UNKNOWN_GAME", "INTERNAL"} <= set(listed), (service, listed)
        assert set(listed.values()) <= codes, listed
