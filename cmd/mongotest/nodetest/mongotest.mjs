// Starts and stops the mongotest command for the Node.js tests, as a test
// suite of any language would: run the binary, read its connection string
// (the first line of its standard output) and its -info-file, drive it
// through the control endpoint, stop it with SIGTERM.
//
// MONGOTEST_BIN names the binary: `go build -o /tmp/mongotest ./cmd/mongotest`
// from the repository's root, then MONGOTEST_BIN=/tmp/mongotest node --test.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

// Every wait of the tests is bounded by this.
export const TIMEOUT_MS = 20_000;

// withTimeout settles as promise does, or rejects with what after ms.
export async function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// startMongotest starts the command with args and resolves once it is up,
// to an object with the connection string (uri), the -info-file's content
// (info: control, hosts, tls, ...), control() for the control endpoint,
// stop() and kill().
export async function startMongotest(args = []) {
  const bin = process.env.MONGOTEST_BIN;
  if (!bin) {
    throw new Error(
      'MONGOTEST_BIN is not set: build the command (go build -o /tmp/mongotest ./cmd/mongotest) and set MONGOTEST_BIN to it',
    );
  }
  const dir = await mkdtemp(join(tmpdir(), 'mongotest-node-'));
  const infoFile = join(dir, 'info.json');
  // -exit-on-eof: should this process die without stopping it, the end of
  // the pipe to its standard input stops it.
  const child = spawn(bin, [...args, '-exit-on-eof', '-info-file', infoFile], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const exited = once(child, 'exit');
  exited.catch(() => {}); // a failed spawn is reported below
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => {
    stderr += d;
  });

  const lines = [];
  const ready = new Promise((resolve, reject) => {
    child.on('error', reject);
    const rl = createInterface({ input: child.stdout });
    rl.on('line', (line) => {
      lines.push(line);
      if (line.startsWith('control: ')) resolve();
    });
    rl.on('close', () => reject(new Error(`mongotest ended before it was up; stderr:\n${stderr}`)));
  });
  try {
    await withTimeout(ready, TIMEOUT_MS, 'waiting for mongotest to start');
  } catch (err) {
    child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const info = JSON.parse(await readFile(infoFile, 'utf8'));

  const running = () => child.exitCode === null && child.signalCode === null;
  return {
    uri: lines[0],
    info,
    stderr: () => stderr,

    // control sends a request to the control endpoint and resolves to its
    // HTTP status and JSON reply.
    async control(path, { method = 'POST', body } = {}) {
      const res = await fetch(info.control + path, {
        method,
        body: body === undefined || typeof body === 'string' ? body : JSON.stringify(body),
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
      return { status: res.status, json: await res.json() };
    },

    // stop stops the command with SIGTERM and resolves to its exit code.
    async stop() {
      if (running()) child.kill('SIGTERM');
      const [code, signal] = await withTimeout(exited, TIMEOUT_MS, 'waiting for mongotest to stop');
      await rm(dir, { recursive: true, force: true });
      return { code, signal, stderr };
    },

    // kill kills the command if it still runs: the tests' last resort.
    async kill() {
      if (running()) {
        child.kill('SIGKILL');
        await withTimeout(exited, TIMEOUT_MS, 'waiting for mongotest to die');
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

// stopChecked stops m, the command startMongotest started (nothing if it
// did not start), and checks that it exited cleanly, with 0.
export async function stopChecked(m) {
  if (!m) return;
  const { code, stderr } = await m.stop();
  assert.equal(code, 0, `mongotest exited with ${code}:\n${stderr}`);
}
