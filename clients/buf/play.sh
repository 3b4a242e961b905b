#!/usr/bin/env bash
# buf curl against uno-audit: the short classic game of clients/node/play.js on the same fixed deck, every
# call made as the admin (acting for each seat with as_seat) over plaintext gRPC, the schema read from
# the server's reflection. Prints each request (>>>) and reply (<<<); a refused call's error goes to the
# transcript too. Exits non-zero on any error but the one refusal the game expects.
#
#   UNO_AUDIT_ADMIN_TOKEN=... clients/buf/play.sh [HOST:PORT]
#
# The address defaults to $UNO_AUDIT_ADDRESS, else 127.0.0.1:50051. buf is $BUF, else buf on the PATH,
# else .venv/bin/buf (the PyPI package buf-bin). The token goes to buf on standard input, not in argv.
set -euo pipefail

ADDRESS="${1:-${UNO_AUDIT_ADDRESS:-127.0.0.1:50051}}"
: "${UNO_AUDIT_ADMIN_TOKEN:?set UNO_AUDIT_ADMIN_TOKEN (the admin token of the server)}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUF="${BUF:-$(command -v buf || echo "$HERE/../../.venv/bin/buf")}"
SERVICE="http://$ADDRESS/uno.audit.v1.GameService"

# rpc METHOD JSON: print the request, send it as the admin, print the reply (kept in $REPLY_JSON).
rpc() {
    printf '>>> %s %s\n' "$1" "$2"
    REPLY_JSON="$(printf 'Authorization: Bearer %s\n' "$UNO_AUDIT_ADMIN_TOKEN" \
        | "$BUF" curl --protocol grpc --http2-prior-knowledge -H @- -d "$2" "$SERVICE/$1")"
    printf '<<< %s\n' "$REPLY_JSON"
}

# refused METHOD JSON REASON: the same, for a call that must fail with FAILED_PRECONDITION, ErrorInfo's
# reason REASON in the message (buf curl prints the error's details base64-encoded).
refused() {
    local error
    printf '>>> %s %s\n' "$1" "$2"
    if printf 'Authorization: Bearer %s\n' "$UNO_AUDIT_ADMIN_TOKEN" \
        | "$BUF" curl --protocol grpc --http2-prior-knowledge -H @- -d "$2" "$SERVICE/$1" 2>"$ERRORS"; then
        echo "play.sh: $1 was accepted; it should have been refused with $3" >&2
        exit 1
    fi
    error="$(cat "$ERRORS")"
    printf '<<< %s\n' "$error"
    grep -q '"code": *"failed_precondition"' <<<"$error" && grep -q "\"message\": *\"$3:" <<<"$error" \
        || { echo "play.sh: $1 failed otherwise than with $3" >&2; exit 1; }
}

# expect TEXT: the last reply holds TEXT (a JSON fragment as buf curl prints it), else the game went wrong.
expect() {
    grep -q -- "$1" <<<"$REPLY_JSON" || { echo "play.sh: the reply lacks $1" >&2; exit 1; }
}

ERRORS="$(mktemp)"
trap 'rm -f "$ERRORS"' EXIT

# The fixed deck, top first: the two hands dealt one card at a time from the dealer's left (bo, ann, bo,
# ...), the first card flipped (R5), the card ann draws (R2), then the rest of the classic deck's 108.
TOP=(R7 B1 RS B2 RR B3 YR B4 YS B6 GS B8 G7 B9 R5 R2)
REST=()
for colour in R Y G B; do
    REST+=("${colour}0")
    for face in 1 2 3 4 5 6 7 8 9 S R +2; do REST+=("$colour$face" "$colour$face"); done
done
for _ in 1 2 3 4; do REST+=(W W+4); done
for card in "${TOP[@]}"; do
    for i in "${!REST[@]}"; do
        if [[ "${REST[$i]}" == "$card" ]]; then unset 'REST[i]'; break; fi
    done
done
DECK="$(printf '"%s",' "${TOP[@]}" "${REST[@]}")"
DECK="[${DECK%,}]"

rpc CreateGame '{"commandId": "create", "variant": "CLASSIC", "players": ["ann", "bo"],
  "options": {"dealer_selection": "given"}, "targetScore": 1}'
GAME="$(sed -n 's/^ *"gameId": *"\([^"]*\)".*/\1/p' <<<"$REPLY_JSON" | head -n 1)"
[[ -n "$GAME" ]] || { echo "play.sh: CreateGame returned no game id" >&2; exit 1; }

# header COMMAND_ID SEAT: a command header for the game.
header() { printf '"header": {"gameId": "%s", "commandId": "%s", "asSeat": %s}' "$GAME" "$1" "$2"; }

rpc StartRound "{$(header deal 0), \"fixedDeck\": $DECK}"
expect '"awaiting": "play"'
rpc Play "{$(header bo-1 1), \"card\": \"R7\"}"
rpc Play "{$(header bo-1 1), \"card\": \"R7\"}"   # the same command again: a retry, answered once more
expect '"duplicate": true'
refused Play "{$(header ann-1 0), \"card\": \"B1\"}" play.match
rpc Draw "{$(header ann-2 0)}"
expect '"drawn": "R2"'
rpc Pass "{$(header ann-3 0)}"
rpc Play "{$(header bo-2 1), \"card\": \"RS\"}"
rpc Play "{$(header bo-3 1), \"card\": \"RR\"}"
rpc Play "{$(header bo-4 1), \"card\": \"YR\"}"
rpc Play "{$(header bo-5 1), \"card\": \"YS\"}"
rpc Play "{$(header bo-6 1), \"card\": \"GS\", \"uno\": true}"
rpc Play "{$(header bo-7 1), \"card\": \"G7\"}"
expect '"awaiting": "game-over"'
expect '"winner": 1'
rpc WatchGame "{\"gameId\": \"$GAME\", \"afterVersion\": 23}"
expect '"type": "GameEnded"'
