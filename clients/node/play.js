#!/usr/bin/env node
// A Node client of uno-audit's gRPC API: plays one short classic game on a fixed deck and prints what
// was said. CreateGame (admin), StartRound from the fixed deck (admin), the seats' Play, Draw and Pass
// with their own tokens (one command retried, one refused on purpose), WatchGame to read the events back;
// the last line is the outcome as JSON. The .proto files are loaded from protos/ as they are.
//
//   node play.js [--address HOST:PORT] [--admin-token-file FILE]
//
// The address defaults to $UNO_AUDIT_ADDRESS, else 127.0.0.1:50051; the admin token comes from the file
// or from $UNO_AUDIT_ADMIN_TOKEN, never from the command line (ps shows it). Exits 1 on any error.
'use strict';

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { parseArgs } = require('node:util');

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');

const PROTOS = path.join(__dirname, '..', '..', 'protos');
const CALL_TIMEOUT_MS = 10_000;

// --- The fixed deck -------------------------------------------------------------------------------
// Two seats, ann (0, the dealer) and bo (1, first to play). bo holds a chain of Skips and Reverses
// (with two players a Reverse skips too), so after his first card he plays on and goes out; ann holds
// blue numbers that match nothing, and the card she draws, R2, she may play but passes.
const PLAYERS = ['ann', 'bo'];
const HANDS = {
  ann: ['B1', 'B2', 'B3', 'B4', 'B6', 'B8', 'B9'],
  bo: ['R7', 'RS', 'RR', 'YR', 'YS', 'GS', 'G7'],
};
const FIRST = 'R5';
const DRAWS = ['R2'];

// [seat, RPC, fields, what is expected of it]
const MOVES = [
  ['bo', 'Play', { card: 'R7' }, 'ok'],
  ['bo', 'Play', { card: 'R7' }, 'retry'], // resent with the same command_id: answered, not applied again
  ['ann', 'Play', { card: 'B1' }, 'FAILED_PRECONDITION'], // B1 on R7: refused by rule play.match
  ['ann', 'Draw', {}, 'ok'], // draws R2, playable: the game waits for her to play or pass it
  ['ann', 'Pass', {}, 'ok'],
  ['bo', 'Play', { card: 'RS' }, 'ok'],
  ['bo', 'Play', { card: 'RR' }, 'ok'],
  ['bo', 'Play', { card: 'YR' }, 'ok'],
  ['bo', 'Play', { card: 'YS' }, 'ok'],
  ['bo', 'Play', { card: 'GS', uno: true }, 'ok'], // down to one card: UNO is called with the play
  ['bo', 'Play', { card: 'G7' }, 'ok'], // out: bo wins the round and, at target score 1, the game
];

/** The 108 cards of the classic deck. */
function classicDeck() {
  const deck = [];
  for (const colour of 'RYGB') {
    deck.push(`${colour}0`);
    for (const face of ['1', '2', '3', '4', '5', '6', '7', '8', '9', 'S', 'R', '+2']) {
      deck.push(colour + face, colour + face);
    }
  }
  for (let i = 0; i < 4; i++) deck.push('W', 'W+4');
  return deck;
}

/** The whole deck, top first: dealt one card at a time from the dealer's left (bo, ann, bo, ...), then
 * the first card flipped, then the draw pile. A fixed deck must hold every card of the rule set. */
function fixedDeck() {
  const rest = classicDeck();
  const take = (card) => {
    const at = rest.indexOf(card);
    if (at < 0) throw new Error(`the deck has no more ${card}`);
    return rest.splice(at, 1)[0];
  };
  const dealt = [];
  for (let i = 0; i < HANDS.bo.length; i++) dealt.push(take(HANDS.bo[i]), take(HANDS.ann[i]));
  return [...dealt, take(FIRST), ...DRAWS.map(take), ...rest];
}

// --- gRPC -------------------------------------------------------------------------------------------
function loadServices(address) {
  const definition = protoLoader.loadSync(['uno/audit/v1/game.proto'], {
    includeDirs: [PROTOS],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const v1 = grpc.loadPackageDefinition(definition).uno.audit.v1;
  return new v1.GameService(address, grpc.credentials.createInsecure());
}

// google.rpc.Status and the two details a client acts on. They are not in protos/ (the server's
// reflection serves them too); these few fields are all that decoding them needs.
const rpcTypes = protobuf.Root.fromJSON({
  nested: {
    google: {
      nested: {
        protobuf: {
          nested: {
            Any: { fields: { type_url: { type: 'string', id: 1 }, value: { type: 'bytes', id: 2 } } },
            Duration: { fields: { seconds: { type: 'int64', id: 1 }, nanos: { type: 'int32', id: 2 } } },
          },
        },
        rpc: {
          nested: {
            Status: {
              fields: {
                code: { type: 'int32', id: 1 },
                message: { type: 'string', id: 2 },
                details: { rule: 'repeated', type: 'google.protobuf.Any', id: 3 },
              },
            },
            ErrorInfo: {
              fields: {
                reason: { type: 'string', id: 1 },
                domain: { type: 'string', id: 2 },
                metadata: { keyType: 'string', type: 'string', id: 3 },
              },
            },
            RetryInfo: { fields: { retry_delay: { type: 'google.protobuf.Duration', id: 1 } } },
          },
        },
      },
    },
  },
});

/** The ErrorInfo and RetryInfo of a failed call (from its grpc-status-details-bin trailer). */
function errorDetails(error) {
  const found = {};
  const raw = error.metadata ? error.metadata.get('grpc-status-details-bin')[0] : undefined;
  if (!raw) return found;
  for (const detail of rpcTypes.lookupType('google.rpc.Status').decode(raw).details) {
    const name = detail.type_url.slice(detail.type_url.lastIndexOf('/') + 1);
    if (name === 'google.rpc.ErrorInfo' || name === 'google.rpc.RetryInfo') {
      found[name.slice('google.rpc.'.length)] = rpcTypes.lookupType(name).decode(detail.value);
    }
  }
  return found;
}

function metadataFor(token) {
  const metadata = new grpc.Metadata();
  if (token) metadata.set('authorization', `Bearer ${token}`);
  return metadata;
}

function unary(client, method, request, token) {
  const options = { deadline: Date.now() + CALL_TIMEOUT_MS };
  return new Promise((resolve, reject) => {
    client[method](request, metadataFor(token), options, (error, reply) =>
      error ? reject(error) : resolve(reply),
    );
  });
}

const RETRYABLE = new Set([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED]);

/** One call, retried while the server is out of reach (docs/grpc.md, "Retrying"): the same request, so the
 * same command_id, is resent; a command applied before its reply was lost comes back once, as a
 * duplicate. Each wait is at least RetryInfo.retry_delay, plus exponential backoff with jitter. */
async function call(client, method, request, token, attempts = 6) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await unary(client, method, request, token);
    } catch (error) {
      if (!RETRYABLE.has(error.code) || attempt >= attempts) throw error;
      const delay = errorDetails(error).RetryInfo?.retry_delay;
      const least = delay ? Number(delay.seconds) * 1000 + delay.nanos / 1e6 : 0;
      const backoff = Math.random() * Math.min(5000, 50 * 2 ** attempt);
      await new Promise((wake) => setTimeout(wake, least + backoff));
    }
  }
}

/** Every event of a game after a version, until the stream ends (a finished game's stream ends). */
function watch(client, gameId, token) {
  return new Promise((resolve, reject) => {
    const events = [];
    const stream = client.WatchGame({ game_id: gameId, after_version: 0 }, metadataFor(token), {
      deadline: Date.now() + CALL_TIMEOUT_MS,
    });
    stream.on('data', (event) => events.push(event));
    stream.on('error', reject);
    stream.on('end', () => resolve(events));
  });
}

/** A google.protobuf.Struct as proto-loader decodes it, as a plain object. (The well-known types keep
 * protobufjs's camelCase field names whatever keepCase says.) */
function fromValue(value) {
  switch (value.kind) {
    case 'structValue':
      return fromStruct(value.structValue);
    case 'listValue':
      return value.listValue.values.map(fromValue);
    case 'nullValue':
      return null;
    default:
      return value[value.kind];
  }
}
function fromStruct(struct) {
  return Object.fromEntries(Object.entries(struct.fields || {}).map(([key, value]) => [key, fromValue(value)]));
}

// --- The game -----------------------------------------------------------------------------------------
function say(who, what, outcome) {
  console.log(`${who.padEnd(6)} ${what.padEnd(28)} ${outcome}`);
}

function describe(view) {
  const seat = view.players[view.turn];
  switch (view.awaiting) {
    case 'game-over':
      return `game over, ${view.players[view.winner]} wins`;
    case 'round-start':
      return 'no round dealt yet';
    case 'play':
      return `${seat} to play on ${view.top}`;
    case 'drawn':
      return `${seat} may play the drawn ${view.drawn} or pass`;
    default:
      return `waiting for ${seat}: ${view.awaiting}`;
  }
}

function configuration() {
  const { values } = parseArgs({
    options: { address: { type: 'string' }, 'admin-token-file': { type: 'string' } },
  });
  const address = values.address || process.env.UNO_AUDIT_ADDRESS || '127.0.0.1:50051';
  const file = values['admin-token-file'];
  const token = (file ? fs.readFileSync(file, 'utf8') : process.env.UNO_AUDIT_ADMIN_TOKEN || '').trim();
  if (!token) throw new Error('no admin token: set UNO_AUDIT_ADMIN_TOKEN or pass --admin-token-file');
  return { address, admin: token };
}

async function play({ address, admin }) {
  const client = loadServices(address);
  try {
    const created = await call(client, 'CreateGame', {
      command_id: crypto.randomUUID(),
      variant: 'CLASSIC',
      players: PLAYERS,
      options: { fields: { dealer_selection: { stringValue: 'given' } } },
      target_score: 1,
    }, admin);
    const gameId = created.game_id;
    const tokens = Object.fromEntries(created.seats.map((seat) => [seat.player, seat.token]));
    say('admin', 'CreateGame', `game ${gameId}, version ${created.version}, ${describe(created.view)}`);

    const deck = fixedDeck();
    let reply = await call(client, 'StartRound', {
      header: { game_id: gameId, command_id: crypto.randomUUID() },
      fixed_deck: deck,
    }, admin);
    say('admin', `StartRound (${deck.length} cards)`, `version ${reply.version}, ${describe(reply.view)}`);

    let last = null;
    for (const [player, method, fields, expected] of MOVES) {
      const what = [method, fields.card, fields.uno ? '+ UNO' : ''].filter(Boolean).join(' ');
      // A retry is the previous request, sent again as it was.
      const request = expected === 'retry' ? last : {
        header: { game_id: gameId, command_id: crypto.randomUUID() },
        ...fields,
      };
      last = request;
      try {
        reply = await call(client, method, request, tokens[player]);
      } catch (error) {
        const info = errorDetails(error).ErrorInfo;
        if (expected !== grpc.status[error.code]) throw error;
        say(player, what, `refused: ${grpc.status[error.code]} ${info?.reason} (${error.details})`);
        continue;
      }
      if (expected !== 'ok' && expected !== 'retry') throw new Error(`${what} was accepted, not ${expected}`);
      if (reply.duplicate !== (expected === 'retry')) throw new Error(`${what}: duplicate ${reply.duplicate}`);
      const events = reply.events.map((event) => event.type).join(' ');
      const retried = reply.duplicate ? 'duplicate, ' : '';
      say(player, what, `${retried}version ${reply.version}, ${describe(reply.view)} [${events}]`);
    }
    if (reply.view.awaiting !== 'game-over') throw new Error(`the game did not end: ${describe(reply.view)}`);
    const receipt = reply.receipt.split('\n');
    say('bo', 'receipt of the last reply', `${receipt[0]} at version ${receipt[1]}`);

    const events = await watch(client, gameId, admin);
    // Prompted events (whose turn it is, and for what) are left out of the transcript.
    const shown = events.filter((event) => event.type !== 'Prompted');
    say('admin', 'WatchGame', `${events.length} events, the stream ended with the game; without Prompted:`);
    for (const event of shown) {
      const payload = fromStruct(event.payload);
      const fields = ['player', 'card', 'uno', 'winner', 'points']
        .filter((key) => key in payload && payload[key] !== false)
        .map((key) => `${key}=${payload[key]}`)
        .join(' ');
      console.log(`  ${String(event.version).padStart(3)} ${event.type.padEnd(18)}${fields}`.trimEnd());
    }
    const ended = events.find((event) => event.type === 'GameEnded');
    if (!ended) throw new Error('WatchGame ended without GameEnded');
    const winner = fromStruct(ended.payload).winner;
    console.log(JSON.stringify({ game_id: gameId, version: reply.version, events: events.length, winner }));
  } finally {
    client.close();
  }
}

async function main() {
  try {
    await play(configuration());
  } catch (error) {
    const info = errorDetails(error).ErrorInfo;
    const code = error.code !== undefined ? `${grpc.status[error.code]} ` : '';
    console.error(`play.js: ${code}${info ? `${info.reason}: ` : ''}${error.details || error.message}`);
    process.exitCode = 1;
  }
}

main();
