// Integration test: programmatic tool calling approved by the official MCP TypeScript SDK's
// Client answering elicitation requests. The client registers an MCP server
// (@modelcontextprotocol/server-everything over stdio) with register_mcp_server, runs one cell
// that calls two of its tools in a loop through the generated `mcptools` package, and approves
// or declines each call from its elicitation handler.
//
// Run by tests/integration/test_ts_sdk.py from $BUILD/node:
//   node tools_test.mjs stdio IPYBOX SERVER_PARAMS_JSON     (`ipybox mcp --embedded`)
//   node tools_test.mjs socket SOCKET SERVER_PARAMS_JSON    (an `ipyboxd --user` socket)
// Prints a JSON summary on stdout and exits 0; on a failure prints why and exits 1.
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { UnixSocketClientTransport } from './unix_transport.mjs';

const DEADLINE_MS = 240000;

function textOf(result) {
    return result.content.filter(c => c.type === 'text').map(c => c.text).join('\n');
}

async function main(mode, target, serverParams) {
    const transport = mode === 'stdio'
        ? new StdioClientTransport({ command: target, args: ['mcp', '--embedded'], stderr: 'inherit' })
        : new UnixSocketClientTransport(target);
    const client = new Client({ name: 'ipybox-ts-tools-test', version: '1.0.0' },
                              { capabilities: { elicitation: {} } });
    const asked = [];
    // Approves get-sum and the echo calls whose message says "yes"; declines the rest.
    client.setRequestHandler(ElicitRequestSchema, async request => {
        const message = request.params.message;
        asked.push(message);
        return message.includes('yes') || message.includes("'get-sum'") ? { action: 'accept', content: {} } : { action: 'decline' };
    });
    await client.connect(transport);

    const registered = await client.callTool({
        name: 'register_mcp_server',
        arguments: { server_name: 'everything', server_params: serverParams },
    });
    assert.notEqual(registered.isError, true, `register_mcp_server failed: ${textOf(registered)}`);
    const modules = JSON.parse(registered.content[0].text);
    assert.ok(modules.includes('echo') && modules.includes('get_sum'), `modules: ${modules}`);

    const code = [
        'import mcptools',
        'from mcptools.everything import echo, get_sum',
        'out = []',
        "for word in ('yes-1', 'no-2', 'yes-3'):",
        '    try:',
        '        out.append(echo.run(message=word))',
        '    except mcptools.ToolRejected:',
        "        out.append('rejected ' + word)",
        'out.append(get_sum.run(a=20, b=22))',
        'print(out)',
    ].join('\n');
    const result = await client.callTool({ name: 'execute_ipython_cell', arguments: { code } },
                                         undefined, { timeout: DEADLINE_MS });
    const text = textOf(result);
    assert.notEqual(result.isError, true, `the cell failed: ${text}`);
    await client.close();
    return { ok: true, modules, asked, text };
}

const [mode, target, paramsJson] = process.argv.slice(2);
const deadline = setTimeout(() => {
    console.log(JSON.stringify({ ok: false, error: `no result within ${DEADLINE_MS} ms` }));
    process.exit(1);
}, DEADLINE_MS + 30000);
main(mode, target, JSON.parse(paramsJson)).then(summary => {
    clearTimeout(deadline);
    console.log(JSON.stringify(summary));
    process.exit(0);
}, error => {
    clearTimeout(deadline);
    console.log(JSON.stringify({ ok: false, error: String(error && error.stack || error) }));
    process.exit(1);
});
