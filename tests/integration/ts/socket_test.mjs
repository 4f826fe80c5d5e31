// Integration test: the official MCP TypeScript SDK (@modelcontextprotocol/sdk) as the client of
// `ipyboxd --user --socket PATH`, over a unix-socket transport written here against the SDK's
// Transport interface. The framing is the SDK's own stdio framing (ReadBuffer, serializeMessage):
// the daemon speaks MCP's stdio protocol, newline-delimited JSON-RPC, on its socket.
//
// Run by tests/integration/test_ts_sdk.py from $BUILD/node (where the SDK is installed):
//   node socket_test.mjs SOCKET_PATH
// Prints a JSON summary on stdout and exits 0; on a failure prints why and exits 1.
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ResultSchema } from '@modelcontextprotocol/sdk/types.js';

import { UnixSocketClientTransport } from './unix_transport.mjs';

const DEADLINE_MS = 120000;

function textOf(result) {
    return result.content.filter(c => c.type === 'text').map(c => c.text).join('');
}

async function execute(client, code) {
    const result = await client.callTool({ name: 'execute_ipython_cell', arguments: { code } });
    assert.ok(Array.isArray(result.content), `the result has a content array: ${JSON.stringify(result)}`);
    const text = textOf(result);
    assert.notEqual(result.isError, true, `${JSON.stringify(code)} failed: ${text}`);
    return text;
}

async function listSessions(client) {
    // A custom method: the SDK's generic result schema (a loose object) keeps the extra fields.
    const result = await client.request({ method: 'ipybox/listSessions' }, ResultSchema);
    assert.ok(Array.isArray(result.sessions), `listSessions returns a sessions array: ${JSON.stringify(result)}`);
    return result.sessions;
}

async function main(socketPath) {
    const transportErrors = [];
    const transport = new UnixSocketClientTransport(socketPath);
    const client = new Client({ name: 'ipybox-ts-sdk-socket-test', version: '1.0.0' });
    client.onerror = error => { transportErrors.push(String(error)); };
    let closed = false;
    client.onclose = () => { closed = true; };

    await client.connect(transport); // start() + initialize + notifications/initialized
    const server = client.getServerVersion();
    assert.equal(server?.name, 'ipybox', `serverInfo: ${JSON.stringify(server)}`);
    assert.ok(transport.protocolVersion, 'the client passed the negotiated protocol version to the transport');
    assert.ok(client.getServerCapabilities()?.tools, 'the server declares the tools capability');

    const { tools } = await client.listTools();
    const toolNames = tools.map(t => t.name).sort();
    assert.ok(toolNames.includes('execute_ipython_cell'), `tools: ${toolNames.join(', ')}`);

    const sessionsBefore = await listSessions(client);
    assert.deepEqual(sessionsBefore, [], 'a fresh daemon has no sessions before the first tool call');

    const first = await execute(client, 'x = 6 * 7');
    const second = await execute(client, 'print(x)');
    assert.ok(second.includes('42'), `print(x) after x = 6 * 7 printed ${JSON.stringify(second)}`);

    const sessions = await listSessions(client);
    const attached = sessions.filter(s => s.attached === true);
    assert.equal(attached.length, 1, `exactly one session is attached: ${JSON.stringify(sessions)}`);
    assert.equal(sessions.length, 1, `one session: ${JSON.stringify(sessions)}`);
    assert.equal(attached[0].anonymous, true, `the first tool call made a private one: ${JSON.stringify(sessions)}`);
    assert.equal(attached[0].clients, 1, JSON.stringify(sessions));
    assert.equal(attached[0].ready, true, JSON.stringify(sessions));

    await client.close();
    assert.equal(closed, true, 'client.onclose ran when the transport closed');
    assert.equal(transport.closeForced, false, 'the daemon closed its end of the socket after ours');
    assert.deepEqual(transportErrors, [], 'no transport errors');

    return {
        ok: true,
        socket: socketPath,
        server,
        protocolVersion: transport.protocolVersion,
        tools: toolNames,
        sessionsBefore,
        cells: [{ code: 'x = 6 * 7', text: first }, { code: 'print(x)', text: second }],
        sessions,
    };
}

const socketPath = process.argv[2];
if (!socketPath) {
    console.log(JSON.stringify({ ok: false, error: 'usage: node socket_test.mjs SOCKET_PATH' }));
    process.exit(1);
}
const deadline = setTimeout(() => {
    console.log(JSON.stringify({ ok: false, error: `not done within ${DEADLINE_MS} ms` }));
    process.exit(1);
}, DEADLINE_MS);
try {
    const summary = await main(socketPath);
    clearTimeout(deadline);
    console.log(JSON.stringify(summary));
    process.exit(0);
} catch (error) {
    clearTimeout(deadline);
    console.log(JSON.stringify({ ok: false, error: String(error?.message ?? error) }));
    console.error(error?.stack ?? String(error));
    process.exit(1);
}
