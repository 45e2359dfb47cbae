// A client on the official TypeScript MCP SDK, for the e2e tests: starts
// `<moniker> serve -c <config>` over stdio, lists tools and prompts, and prints
// {"tools": [...], "prompts": [...], "toolsMeta": {...}, "promptsMeta": {...}} as the SDK hands
// them over (it drops a tool's unknown top-level fields, which is why moniker also puts its own
// in `_meta`; the *Meta are the results' own `_meta`).
//
//   node tests/e2e/ts_client.mjs <moniker binary> <config> [<timeout ms>]
//
// With TS_CALLS set to a JSON list of [tool, arguments] pairs, it then calls each and adds
// "calls": one {"result": ...} or {"error": message} per call, in order. TS_ENV (a JSON object)
// adds variables to the few the SDK gives moniker.
//
// moniker's stderr goes to this script's stderr. Exits 1 (with the reason on stderr) when
// anything fails or takes longer than the timeout (default 20 s).

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";

const [moniker, config, timeoutArg] = process.argv.slice(2);
if (!moniker || !config) {
  process.stderr.write("usage: node ts_client.mjs <moniker binary> <config> [<timeout ms>]\n");
  process.exit(2);
}
const timeout = Number(timeoutArg ?? 20000);
const timer = setTimeout(() => {
  process.stderr.write(`ts_client: no answer within ${timeout} ms\n`);
  process.exit(1);
}, timeout);

const transport = new StdioClientTransport({
  command: moniker,
  args: ["serve", "-c", config],
  // The SDK gives a server a few variables only; TS_ENV (a JSON object) adds to them.
  env: { ...getDefaultEnvironment(), ...JSON.parse(process.env.TS_ENV ?? "{}") },
  stderr: "inherit",
});
const client = new Client({ name: "moniker-e2e-ts", version: "0.0.0" });

try {
  await client.connect(transport);
  const { tools, _meta: toolsMeta } = await client.listTools();
  const { prompts, _meta: promptsMeta } = await client.listPrompts();
  const calls = [];
  for (const [name, args] of JSON.parse(process.env.TS_CALLS ?? "[]")) {
    try {
      calls.push({ result: await client.callTool({ name, arguments: args }) });
    } catch (error) {
      calls.push({ error: String(error?.message ?? error) });
    }
  }
  process.stdout.write(JSON.stringify({ tools, prompts, toolsMeta, promptsMeta, calls }) + "\n");
  await client.close();
  clearTimeout(timer);
} catch (error) {
  process.stderr.write(`ts_client: ${error?.stack ?? error}\n`);
  process.exit(1);
}
