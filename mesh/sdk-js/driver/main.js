// The JavaScript SDK's conformance driver (docs/conformance.md): the bed
// runs it once per command in a container, with a module's credential,
// and reads what it did as JSON lines. It talks to the bus through the
// SDK and nothing else. The SDK claims the floor and events, so the tools
// and provisioning commands answer "not implemented" (exit 3) once their
// command line has been read like any other.

import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

import { connect } from '../src/sdk/module.js';
import { BootstrapError, CredentialError, DeniedError, FingerprintError, InvalidError, NoConsumerError, NoRespondersError, TimeoutError } from '../src/sdk/errors.js';
import { ENV_MODULE, ENV_NODE, validTime } from '../src/sdk/wire.js';

const EXIT_RAN = 0;
const EXIT_USAGE = 2;
const EXIT_UNSUPPORTED = 3;

// The commands, their flags and what each needs, as conformance/driverproto
// reads them (a test runs this driver against that package's parser's
// verdicts).
const COMMANDS = {
  connect: { synopsis: 'connect', capability: 'connection', flags: {} },
  emit: { synopsis: 'emit --fixture FILE', capability: 'events', flags: { fixture: 'string' }, check: (c) => (c.fixture ? null : '--fixture FILE is required') },
  consume: {
    synopsis: 'consume --pattern P [--pattern P ...] --count N --timeout D [--fail | --fail-for D] [--redeliver-after D]',
    capability: 'events',
    flags: { pattern: 'strings', count: 'int', timeout: 'duration', fail: 'bool', 'fail-for': 'duration', 'redeliver-after': 'duration' },
    defaults: { pattern: [], count: 1, timeout: 10000, fail: false, 'fail-for': 0, 'redeliver-after': 0 },
    check: (c) => {
      if (c.pattern.length === 0) return 'at least one --pattern is required';
      if (c.count < 1) return `--count must be at least 1, got ${c.count}`;
      if (c.timeout <= 0) return '--timeout must be more than 0';
      if (c.fail && c['fail-for'] > 0) return '--fail and --fail-for exclude each other';
      return null;
    },
  },
  serve: {
    synopsis: 'serve --tool T --duration D [--fail MESSAGE | --panic]',
    capability: 'tools',
    flags: { tool: 'string', duration: 'duration', fail: 'string', panic: 'bool' },
    defaults: { duration: 10000 },
    check: (c) => {
      if (!c.tool) return '--tool T is required';
      if (c.duration <= 0) return '--duration must be more than 0';
      if (c.fail && c.panic) return '--fail and --panic exclude each other';
      return null;
    },
  },
  call: {
    synopsis: 'call --module M --tool T --args JSON --timeout D',
    capability: 'tools',
    flags: { module: 'string', tool: 'string', args: 'string', timeout: 'duration' },
    defaults: { args: '{}', timeout: 5000 },
    check: (c) => {
      if (!c.module || !c.tool) return '--module M and --tool T are required';
      try {
        JSON.parse(c.args);
      } catch {
        return `--args must be JSON, got ${JSON.stringify(c.args)}`;
      }
      if (c.timeout <= 0) return '--timeout must be more than 0';
      return null;
    },
  },
  grant: { synopsis: 'grant --file FILE', capability: 'provisioning', flags: { file: 'string' }, check: (c) => (c.file ? null : '--file FILE is required') },
};

const CLAIMS = ['connection', 'events'];

export function usage(program = 'driver') {
  let s = `${program} COMMAND [FLAGS] — a conformance driver (docs/conformance.md)\n\nCommands:\n`;
  for (const c of Object.values(COMMANDS)) s += `  ${c.synopsis}\n`;
  s += '\nA duration D is a whole number with its unit, ms or s: 500ms, 90s.\n';
  s += 'The module\'s credential is the file $MESH_CREDENTIAL names.\n';
  return s;
}

class UsageError extends Error {}
class HelpAsked extends Error {}

const isHelp = (a) => a === 'help' || a === '-h' || a === '-help' || a === '--help';

// parseDuration reads the protocol's duration, in milliseconds.
export function parseDuration(s) {
  const m = /^([0-9]{1,9})(ms|s)$/.exec(s);
  if (!m) throw new UsageError(`duration ${JSON.stringify(s)}: want a whole number with ms or s, e.g. 500ms or 90s`);
  return Number(m[1]) * (m[2] === 's' ? 1000 : 1);
}

// parseCommand reads a command line as Go's flag package does for the
// protocol: -name or --name, a value as the next word or after '='.
export function parseCommand(args) {
  if (args.length === 0) throw new UsageError('a command is required');
  if (isHelp(args[0])) throw new HelpAsked();
  const spec = COMMANDS[args[0]];
  if (!spec) throw new UsageError(`unknown command ${JSON.stringify(args[0])} (known: ${Object.keys(COMMANDS).join(', ')})`);
  const c = { name: args[0], capability: spec.capability, ...structuredClone(spec.defaults ?? {}) };
  let i = 1;
  for (; i < args.length; i++) {
    const a = args[i];
    if (a === '--') {
      i++;
      break;
    }
    if (!a.startsWith('-') || a === '-') break;
    let name = a.replace(/^--?/, '');
    let value;
    const eq = name.indexOf('=');
    if (eq >= 0) {
      value = name.slice(eq + 1);
      name = name.slice(0, eq);
    }
    if (name === 'h' || name === 'help') throw new HelpAsked();
    const kind = spec.flags[name];
    if (!kind) throw new UsageError(`${c.name}: flag provided but not defined: -${name}`);
    if (kind === 'bool') {
      if (value !== undefined && !['true', 'false', '1', '0'].includes(value)) throw new UsageError(`${c.name}: invalid boolean value ${JSON.stringify(value)} for -${name}`);
      c[name] = value === undefined || value === 'true' || value === '1';
      continue;
    }
    if (value === undefined) {
      if (i + 1 >= args.length) throw new UsageError(`${c.name}: flag needs an argument: -${name}`);
      value = args[++i];
    }
    try {
      if (kind === 'string') c[name] = value;
      else if (kind === 'strings') {
        if (value === '') throw new UsageError('empty');
        c[name].push(value);
      } else if (kind === 'int') {
        if (!/^[+-]?\d+$/.test(value)) throw new UsageError('parse error');
        c[name] = Number(value);
      } else if (kind === 'duration') c[name] = parseDuration(value);
    } catch (err) {
      throw new UsageError(`${c.name}: invalid value ${JSON.stringify(value)} for flag -${name}: ${err.message}`);
    }
  }
  if (i < args.length) throw new UsageError(`${c.name}: unexpected argument ${JSON.stringify(args[i])}`);
  const bad = spec.check?.(c);
  if (bad) throw new UsageError(`${c.name}: ${bad}`);
  return c;
}

// classOf is the protocol's name for what went wrong.
export function classOf(err) {
  if (err instanceof FingerprintError) return 'fingerprint';
  if (err instanceof BootstrapError) return 'bootstrap';
  if (err instanceof CredentialError || err?.code === 'ENOENT' || err?.code === 'EACCES') return 'credential';
  if (err instanceof NoConsumerError) return 'no_consumer';
  if (err instanceof DeniedError) return 'denied';
  if (err instanceof NoRespondersError) return 'no_responders';
  if (err instanceof TimeoutError) return 'timeout';
  return 'other';
}

const print = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);
const log = (level, msg, attrs = {}) => process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level, msg, ...attrs })}\n`);

function readFixture(path) {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new InvalidError(`read fixture ${path}: ${err.message}`);
  }
}

// until resolves after ms, or at SIGTERM/SIGINT (the bed stopping the
// container), whichever comes first.
function until(ms, also) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    const stop = () => {
      clearTimeout(timer);
      resolve();
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
    also?.(stop);
  });
}

const commands = {
  async connect() {
    const m = await connect({ log });
    try {
      print({ kind: 'identity', node: m.node, module: m.name, env_node: process.env[ENV_NODE] ?? '', env_module: process.env[ENV_MODULE] ?? '' });
    } finally {
      await m.close();
    }
  },

  async emit(c) {
    const f = readFixture(c.fixture);
    if (!validTime(f.time ?? '')) throw new InvalidError(`read fixture ${c.fixture}: time ${JSON.stringify(f.time)} is not RFC 3339`);
    const m = await connect({ log });
    try {
      const id = await m.publish(f.key, f.body, { id: f.id, time: new Date(f.time), causation: f.causation ?? '', schema: f.schema ?? '' });
      print({ kind: 'emitted', id });
    } finally {
      await m.close();
    }
  },

  async consume(c) {
    const failing = failingFor(c.fail, c['fail-for']);
    // 0 (absent): the SDK's own first wait.
    const m = await connect({ log, redeliveryMs: c['redeliver-after'] });
    try {
      let handled = 0;
      let enough;
      for (const pattern of c.pattern) {
        await m.subscribe(pattern, async (e) => {
          print({ kind: 'handled', event: { id: e.id, source: e.source, node: e.node, key: e.key, time: e.time, causation: e.causation, schema: e.schema, body: e.body.toString('utf8') } });
          handled++;
          if (handled >= c.count) enough?.();
          if (failing(e.id)) throw new Error('the driver was told to fail');
        });
      }
      print({ kind: 'ready' });
      await until(c.timeout, (stop) => {
        enough = stop;
        if (handled >= c.count) stop(); // handled before the wait began
      });
    } finally {
      await m.close();
    }
  },
};

// failingFor says, per event id, whether the handler fails this time:
// always (--fail), for ms after the event was first received (--fail-for:
// an outage the handler rides out), or never.
export function failingFor(always, ms, now = Date.now) {
  const first = new Map();
  return (id) => {
    if (always) return true;
    if (ms <= 0) return false;
    if (!first.has(id)) first.set(id, now());
    return now() - first.get(id) < ms;
  };
}

export async function run(args) {
  let c;
  try {
    c = parseCommand(args);
  } catch (err) {
    if (err instanceof HelpAsked) {
      process.stdout.write(usage());
      return EXIT_RAN;
    }
    process.stderr.write(`driver: ${err.message}\n\n${usage()}`);
    return EXIT_USAGE;
  }
  if (!CLAIMS.includes(c.capability)) {
    process.stderr.write(`driver: ${c.name} (${c.capability}) is not implemented: the JavaScript SDK claims ${CLAIMS.join(' and ')}\n`);
    return EXIT_UNSUPPORTED;
  }
  let done = { kind: 'done', ok: true };
  try {
    await commands[c.name](c);
  } catch (err) {
    log('error', c.name, { err: err?.message ?? String(err) });
    done = { kind: 'done', ok: false, class: classOf(err), message: err?.message ?? String(err) };
  }
  print(done);
  return EXIT_RAN;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  run(process.argv.slice(2)).then((code) => process.exit(code));
}
