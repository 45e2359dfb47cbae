// The official TypeScript SDK as the client of one cell of the interoperability matrix
// (test_matrix.py): through moniker (over stdio, or Streamable HTTP at a URL) it lists the
// tools, calls by name, by alias and through an action tool, answers an elicitation, receives
// progress, and reads a resource; it prints {"ok": true} or the first thing that went wrong.
//
//   node ts_matrix_client.mjs stdio <moniker binary> <config>
//   node ts_matrix_client.mjs http <url>

import { Client } from "../e2e/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js";
import { StdioClientTransport } from "../e2e/node_modules/@modelcontextprotocol/sdk/dist/esm/client/stdio.js";
import { StreamableHTTPClientTransport } from "../e2e/node_modules/@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.js";
import { ElicitRequestSchema } from "../e2e/node_modules/@modelcontextprotocol/sdk/dist/esm/types.js";

const [via, ...rest] = process.argv.slice(2);
const transport =
  via === "stdio"
    ? new StdioClientTransport({ command: rest[0], args: ["serve", "-c", rest[1]], stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(rest[0]));
const client = new Client(
  { name: "moniker-matrix-ts", version: "0.0.0" },
  { capabilities: { elicitation: {} } },
);
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  if (!String(request.params.message).includes("colour?")) {
    throw new Error(`an unexpected elicitation: ${request.params.message}`);
  }
  return { action: "accept", content: { answer: "blue" } };
});

const timer = setTimeout(() => {
  process.stdout.write(JSON.stringify({ ok: false, why: "no answer within 40 s" }) + "\n");
  process.exit(1);
}, 40000);

function text(result) {
  return (result.content ?? []).map((c) => c.text ?? "").join(" ");
}

function expect(what, got, want) {
  if (got !== want) {
    throw new Error(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}

// What reached the client's transport, in order. The SDK hands a notification to its handler in
// a later microtask but a response at once, so progress that comes in the same read as its
// result never reaches `onprogress` (the SDK's own race, moniker or not): the test reads the
// progress the transport received before the result.
const received = [];

try {
  await client.connect(transport);
  const dispatch = transport.onmessage;
  transport.onmessage = (message, extra) => {
    received.push(message);
    dispatch(message, extra);
  };
  // The server's tools are listed once it has joined: listed again until then (30 s at most),
  // as moniker's first listing waits for it only `gateway.list_wait`.
  const wanted = ["kit", "sdk_progress"];
  for (const deadline = Date.now() + 30000; ; ) {
    const names = (await client.listTools()).tools.map((t) => t.name);
    if (wanted.every((name) => names.includes(name))) break;
    if (Date.now() > deadline) throw new Error(`tools/list lacks one of ${wanted}: ${names}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect("by name", text(await client.callTool({ name: "sdk_echo", arguments: { text: "a" } })), "sdk:a");
  expect("by alias", text(await client.callTool({ name: "say", arguments: { text: "b" } })), "sdk:b");
  expect(
    "action",
    text(await client.callTool({ name: "kit", arguments: { action: "echo", text: "c" } })),
    "sdk:c",
  );
  expect(
    "elicitation",
    text(await client.callTool({ name: "kit", arguments: { action: "ask", question: "colour?" } })),
    "answer:blue",
  );
  const from = received.length;
  const done = await client.callTool(
    { name: "sdk_progress", arguments: { steps: 3 } },
    undefined,
    { onprogress: () => {} },
  );
  expect("progress result", text(done), "done after 3");
  const before = received.slice(from).filter((m) => m.method === "notifications/progress");
  expect("progress received", JSON.stringify(before.map((m) => m.params.progress)), "[1,2,3]");
  const read = await client.readResource({ uri: "sdk://hello" });
  expect("resource", read.contents.map((c) => c.text).join(""), "hello from the sdk");
  await client.close();
  clearTimeout(timer);
  process.stdout.write(JSON.stringify({ ok: true }) + "\n");
  process.exit(0);
} catch (error) {
  clearTimeout(timer);
  process.stdout.write(JSON.stringify({ ok: false, why: String(error?.stack ?? error) }) + "\n");
  process.exit(1);
}
