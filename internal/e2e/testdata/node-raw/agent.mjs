// A session process written against docs/protocol.md directly, without
// @helmr/sdk: a WebSocket client over the Unix socket in plain Node. It
// serves one Agent, "raw-echo", which writes one output and completes with
// {"echo": <input text>, "runtime": "node"}. The e2e tests deploy it as a
// Node bundle to check the control plane's side of TypeScript agents (build,
// manifest, upload, launch under node in the sandbox) before the SDK exists.
import net from "node:net";
import crypto from "node:crypto";
import fs from "node:fs";

const PREFIX = "node says: ";

if (process.argv.includes("--helmr-manifest")) {
  const box = { id: "box", image: { name: "box", host: true }, resources: { cpu: 1, memory: "256MiB" } };
  process.stdout.write(JSON.stringify({
    version: "helmr.manifest.v1", sdk: "raw-node", runtime: "node",
    agents: [{ id: "raw-echo", template: "box", input_kind: "text", close_after_idle: "1h", hibernate_after_idle: "never", has_init: false }],
    templates: [box],
  }));
  process.exit(0);
}

const socket = process.env.HELMR_SESSION_SOCKET;
// The credential is alone on the descriptor HELMR_SESSION_TOKEN_FD names
// (docs/protocol.md, section 1).
const tokenFD = process.env.HELMR_SESSION_TOKEN_FD;
const token = tokenFD ? fs.readFileSync(Number(tokenFD), "utf8").trim() : process.env.HELMR_SESSION_TOKEN;
if (tokenFD) fs.closeSync(Number(tokenFD));
delete process.env.HELMR_SESSION_TOKEN_FD;
delete process.env.HELMR_SESSION_TOKEN;
if (!socket) {
  console.error("HELMR_SESSION_SOCKET is not set: run me through helmr");
  process.exit(2);
}

const conn = net.connect(socket);
let buf = Buffer.alloc(0);
let upgraded = false;

conn.on("connect", () => {
  const key = crypto.randomBytes(16).toString("base64");
  conn.write(`GET /session HTTP/1.1\r\nHost: helmr\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: helmr.session.v1\r\n` +
    `Authorization: Bearer ${token}\r\n\r\n`);
});

function send(obj) {
  const payload = Buffer.from(JSON.stringify(obj));
  const mask = crypto.randomBytes(4);
  let head;
  if (payload.length < 126) {
    head = Buffer.from([0x81, 0x80 | payload.length]);
  } else if (payload.length < 65536) {
    head = Buffer.alloc(4); head[0] = 0x81; head[1] = 0x80 | 126; head.writeUInt16BE(payload.length, 2);
  } else {
    head = Buffer.alloc(10); head[0] = 0x81; head[1] = 0x80 | 127; head.writeBigUInt64BE(BigInt(payload.length), 2);
  }
  for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i % 4];
  conn.write(Buffer.concat([head, mask, payload]));
}

function close(code) {
  const body = Buffer.alloc(2); body.writeUInt16BE(code, 0);
  const mask = crypto.randomBytes(4);
  for (let i = 0; i < 2; i++) body[i] ^= mask[i % 4];
  conn.write(Buffer.concat([Buffer.from([0x88, 0x82]), mask, body]));
  conn.end();
}

const pending = new Map(); // "turn/op" -> resolve

function frames() {
  for (;;) {
    if (buf.length < 2) return;
    const opcode = buf[0] & 0x0f;
    let len = buf[1] & 0x7f, off = 2;
    if (len === 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); off = 4; }
    else if (len === 127) { if (buf.length < 10) return; len = Number(buf.readBigUInt64BE(2)); off = 10; }
    if (buf.length < off + len) return;
    const payload = buf.subarray(off, off + len);
    buf = buf.subarray(off + len);
    if (opcode === 0x8) { process.exit(0); }
    if (opcode === 0x1) handle(JSON.parse(payload.toString("utf8")));
  }
}

conn.on("data", (chunk) => {
  buf = Buffer.concat([buf, chunk]);
  if (!upgraded) {
    const end = buf.indexOf("\r\n\r\n");
    if (end < 0) return;
    const status = buf.subarray(0, buf.indexOf("\r\n")).toString();
    if (!status.includes(" 101 ")) { console.error("upgrade refused:", status); process.exit(1); }
    upgraded = true;
    buf = buf.subarray(end + 4);
    send({ type: "hello", protocol: "helmr.session.v1", pid: process.pid });
  }
  frames();
});
conn.on("close", () => process.exit(1));

function op(msg) {
  return new Promise((resolve) => {
    pending.set(`${msg.turn_id}/${msg.op}`, resolve);
    send(msg);
  });
}

async function runTurn(turn) {
  const text = (turn.input || []).filter((p) => p.type === "text").map((p) => p.text).join("");
  await op({ type: "output", turn_id: turn.id, op: 1, content: [{ type: "text", text: PREFIX + text }] });
  const ack = await op({ type: "turn.settle", turn_id: turn.id, op: 2, status: "completed", result: { echo: text, runtime: "node" } });
  if (ack.error) { console.error("settle refused:", ack.error); process.exit(1); }
}

function handle(msg) {
  switch (msg.type) {
    case "welcome":
      send({ type: "ready" });
      break;
    case "turn.start":
      runTurn(msg.turn);
      break;
    case "ack": {
      const key = `${msg.turn_id}/${msg.op}`;
      const resolve = pending.get(key);
      pending.delete(key);
      if (resolve) resolve(msg);
      break;
    }
    case "shutdown":
      close(1000);
      setTimeout(() => process.exit(0), 100);
      break;
  }
}
