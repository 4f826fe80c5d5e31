// Benchmark helper (bench/tools.py): the same tool call made directly by the MCP TypeScript SDK's
// Client over stdio, as the baseline for a call made from kernel code through ipybox.
//   node tools_direct.mjs N SERVER_PARAMS_JSON
// Prints {"ms": [per-call milliseconds]} after one warm-up call.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [n, paramsJson] = process.argv.slice(2);
const params = JSON.parse(paramsJson);
const client = new Client({ name: 'ipybox-bench', version: '1.0.0' });
await client.connect(new StdioClientTransport({ command: params.command, args: params.args || [], stderr: 'ignore' }));
await client.callTool({ name: 'echo', arguments: { message: 'warm-up' } });
const ms = [];
for (let i = 0; i < Number(n); i++) {
    const t0 = process.hrtime.bigint();
    const r = await client.callTool({ name: 'echo', arguments: { message: `call ${i}` } });
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    if (r.content[0].text !== `Echo: call ${i}`) throw new Error(`unexpected result ${JSON.stringify(r)}`);
}
await client.close();
console.log(JSON.stringify({ ms }));
