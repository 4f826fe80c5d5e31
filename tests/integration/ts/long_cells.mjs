// A silent cell longer than the client's request timeout, with the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk): callTool with a 15 s `timeout`, an `onprogress` handler (so the
// request carries a progress token) and `resetTimeoutOnProgress` as asked.
//
//   node long_cells.mjs stdio IPYBOX [ARGS...] -- RESET SECONDS   (`ipybox ARGS...` over stdio)
//   node long_cells.mjs socket SOCKET_PATH -- RESET SECONDS      (ipyboxd's socket)
//
// Run by tests/integration/test_long_cells.py. Prints one JSON line: {ok, text, isError} when the
// call returned, {ok: false, code, error} when it failed, and in both the progress notifications
// seen (raw params) and the seconds the call took.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { UnixSocketClientTransport } from './unix_transport.mjs';

const argv = process.argv.slice(2);
const sep = argv.indexOf('--');
const [mode, target, ...extra] = argv.slice(0, sep);
const reset = argv[sep + 1] === 'true';
const seconds = Number(argv[sep + 2]);

const transport = mode === 'stdio'
    ? new StdioClientTransport({ command: target, args: extra, env: process.env, stderr: 'inherit' })
    : new UnixSocketClientTransport(target);
const progress = [];
transport.onmessage = m => {
    if (m.method === 'notifications/progress') progress.push(m.params);
};
const client = new Client({ name: 'ipybox-long-cells-test', version: '1.0.0' });
await client.connect(transport);
const t0 = Date.now();
let summary;
try {
    const result = await client.callTool(
        { name: 'execute_ipython_cell', arguments: { code: `import time\ntime.sleep(${seconds})\nprint("woke")`, timeout: 120 } },
        undefined,
        { timeout: 15000, resetTimeoutOnProgress: reset, onprogress: () => {} });
    summary = { ok: true, isError: result.isError === true, text: result.content.filter(c => c.type === 'text').map(c => c.text).join('') };
} catch (e) {
    summary = { ok: false, code: e.code, error: String(e.message || e) };
}
summary.elapsed = (Date.now() - t0) / 1000;
summary.progress = progress;
console.log(JSON.stringify(summary));
await client.close().catch(() => {});
process.exit(0);
