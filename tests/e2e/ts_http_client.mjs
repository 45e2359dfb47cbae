// A client on the official TypeScript MCP SDK over Streamable HTTP, for the e2e tests of people
// acting as themselves: connects to <url> with `Authorization: Bearer <token>`, calls <tool>
// <count> times at once, and prints {"texts": [...]} (each call's text, or "error: <message>").
//
//   node tests/e2e/ts_http_client.mjs <url> <token> <tool> [<count>] [<timeout ms>]
//
// Exits 1 (the reason on stderr) when the connection fails or the timeout (default 30 s) ends.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, tool, countArg, timeoutArg] = process.argv.slice(2);
if (!url || !token || !tool) {
  process.stderr.write("usage: node ts_http_client.mjs <url> <token> <tool> [<count>] [<timeout ms>]\n");
  process.exit(2);
}
const timer = setTimeout(() => {
  process.stderr.write("ts_http_client: no answer in time\n");
  process.exit(1);
}, Number(timeoutArg ?? 30000));

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "moniker-e2e-ts-http", version: "0.0.0" });
try {
  await client.connect(transport);
  const calls = Array.from({ length: Number(countArg ?? 1) }, () =>
    client.callTool({ name: tool, arguments: {} }).then(
      (result) => result.content.map((c) => c.text ?? "").join(""),
      (error) => `error: ${error.message}`,
    ));
  const texts = await Promise.all(calls);
  process.stdout.write(`${JSON.stringify({ texts })}\n`);
  await client.close();
  clearTimeout(timer);
} catch (error) {
  process.stderr.write(`ts_http_client: ${error.stack ?? error}\n`);
  process.exit(1);
}
