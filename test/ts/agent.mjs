// A real agent: the TypeScript MCP SDK calling portcullis serve.
// Usage: node agent.mjs URL TOKEN TOOL ARGS_JSON [TIMEOUT_MS] [META_JSON]
// (TIMEOUT_MS 0: the SDK's default; META_JSON: the call's _meta, default
// {"io.portcullis/intent-scope": "run:ts"}).
// Prints one JSON line per call: the structured result, or {"error": ...}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, tool, argsJSON, timeoutMs, metaJSON] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "ts-agent", version: "1.0.0" });
try {
  await client.connect(transport);
  const tools = await client.listTools();
  const opts = Number(timeoutMs) > 0 ? { timeout: Number(timeoutMs) } : undefined;
  const meta = metaJSON ? JSON.parse(metaJSON) : { "io.portcullis/intent-scope": "run:ts" };
  const result = await client.callTool(
    { name: tool, arguments: JSON.parse(argsJSON), _meta: meta },
    undefined,
    opts,
  );
  console.log(JSON.stringify({ tools: tools.tools.map((t) => t.name).sort(), isError: !!result.isError, structured: result.structuredContent ?? null }));
} catch (e) {
  console.log(JSON.stringify({ error: String(e?.message ?? e) }));
} finally {
  await client.close().catch(() => {});
}
