// Integration test: drives `ipybox mcp` with the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk) as the client, over stdio.
//
// Run by tests/integration/test_ts_sdk.py, which installs the SDK under $BUILD/node and runs
// `node --test sdk_test.mjs` there. Environment:
//   IPYBOX   path of the ipybox binary (required)
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError, ErrorCode, LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';

const IPYBOX = process.env.IPYBOX;
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
// Protocol versions ipybox supports (supervisor/mcp_server.c), newest first.
const SERVER_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];
const ANSI = /\x1b\[/;

// One temporary directory per run: the workspace (/app), the host side of upload/download, the state.
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ipybox-ts-sdk-'));
const workspace = path.join(tmp, 'workspace');
const host = path.join(tmp, 'host');
const stateHome = path.join(tmp, 'state');
for (const d of [workspace, host, stateHome]) fs.mkdirSync(d);

let client;
let transport;
let child; // the server's ChildProcess (the transport keeps it in a private field)
let childExit; // promise of {code, signal}
const received = []; // every JSON-RPC message from the server, in order
let serverStderr = '';

function textOf(result) {
    return result.content.filter(c => c.type === 'text').map(c => c.text).join('');
}

async function execute(code, extra = {}, options = undefined) {
    const result = await client.callTool({ name: 'execute_ipython_cell', arguments: { code, ...extra } }, undefined, options);
    assert.ok(Array.isArray(result.content), 'the result has a content array');
    return { result, text: textOf(result) };
}

describe('ipybox mcp driven by @modelcontextprotocol/sdk', { concurrency: false }, () => {
    before(async () => {
        assert.ok(IPYBOX, 'set IPYBOX to the path of the ipybox binary');
        assert.ok(fs.existsSync(IPYBOX), `no ipybox binary at ${IPYBOX}`);
        transport = new StdioClientTransport({
            command: IPYBOX,
            args: ['mcp', '--workspace', workspace, '--allowed-dir', host],
            env: { XDG_STATE_HOME: stateHome },
            stderr: 'pipe',
        });
        transport.stderr.on('data', chunk => { serverStderr += chunk.toString(); });
        // Protocol.connect() keeps a previously set onmessage and calls it first: record the raw traffic.
        transport.onmessage = message => { received.push(message); };
        client = new Client({ name: 'ipybox-ts-sdk-test', version: '1.0.0' });
        await client.connect(transport);
        child = transport._process;
        assert.ok(child && child.pid, 'the transport spawned the server');
        childExit = new Promise(resolve => {
            if (child.exitCode !== null || child.signalCode !== null) resolve({ code: child.exitCode, signal: child.signalCode });
            else child.once('exit', (code, signal) => resolve({ code, signal }));
        });
    });

    after(async () => {
        if (child && child.exitCode === null && child.signalCode === null) {
            await client.close().catch(() => {});
        }
        fs.rmSync(tmp, { recursive: true, force: true });
        if (serverStderr) process.stderr.write(`--- ipybox mcp stderr (last 20000 chars) ---\n${serverStderr.slice(-20000)}\n`);
    });

    it('initialize: negotiates the SDK\'s latest protocol version and reports the server', () => {
        const init = received.find(m => m.id !== undefined && m.result && m.result.protocolVersion);
        assert.ok(init, 'an initialize result was received');
        assert.ok(SUPPORTED_PROTOCOL_VERSIONS.includes(init.result.protocolVersion));
        assert.ok(SERVER_VERSIONS.includes(init.result.protocolVersion));
        if (SERVER_VERSIONS.includes(LATEST_PROTOCOL_VERSION)) {
            assert.equal(init.result.protocolVersion, LATEST_PROTOCOL_VERSION);
        }
        assert.equal(client.getServerVersion().name, 'ipybox');
        assert.ok(client.getServerCapabilities().tools, 'the server declares the tools capability');
        assert.match(client.getInstructions() ?? '', /execute_ipython_cell/);
    });

    it('listTools: lists the five tools with their input schemas', async () => {
        const { tools } = await client.listTools();
        const byName = Object.fromEntries(tools.map(t => [t.name, t]));
        assert.deepEqual(Object.keys(byName).sort(),
                         ['download_file', 'execute_ipython_cell', 'register_mcp_server', 'reset', 'upload_file']);
        for (const t of tools) {
            assert.equal(t.inputSchema.type, 'object', `${t.name}: inputSchema.type`);
            assert.equal(typeof t.description, 'string');
            assert.ok(t.description.length > 0);
        }
        const exec = byName.execute_ipython_cell.inputSchema;
        assert.equal(exec.properties.code.type, 'string');
        assert.equal(exec.properties.timeout.type, 'number');
        assert.equal(exec.properties.max_output_chars.type, 'integer');
        assert.deepEqual(exec.required, ['code']);
        for (const name of ['upload_file', 'download_file']) {
            const s = byName[name].inputSchema;
            assert.equal(s.properties.relpath.type, 'string', `${name}.relpath`);
            assert.equal(s.properties.local_path.type, 'string', `${name}.local_path`);
            assert.deepEqual([...s.required].sort(), ['local_path', 'relpath'], `${name}.required`);
        }
        const reset = byName.reset.inputSchema;
        assert.deepEqual(reset.properties ?? {}, {});
        assert.ok(!reset.required || reset.required.length === 0);
    });

    it('ping', async () => {
        assert.deepEqual(await client.ping(), {});
    });

    it('statefulness: a variable persists across cells', async () => {
        const a = await execute('x = 41');
        assert.notEqual(a.result.isError, true, a.text);
        const b = await execute('x + 1');
        assert.notEqual(b.result.isError, true, b.text);
        assert.equal(b.text.trim(), '42');
    });

    it('top-level await', async () => {
        const { result, text } = await execute("import asyncio\nawait asyncio.sleep(0.01)\n'awaited ' + str(6 * 7)");
        assert.notEqual(result.isError, true, text);
        assert.match(text, /'awaited 42'/);
    });

    it('an error keeps the output printed before it, without ANSI escapes', async () => {
        const { result, text } = await execute("print('before')\n1/0");
        assert.equal(result.isError, true, text);
        assert.match(text, /before/);
        assert.match(text, /ZeroDivisionError/);
        assert.ok(text.indexOf('before') < text.indexOf('ZeroDivisionError'), text);
        assert.doesNotMatch(text, ANSI);
    });

    it('matplotlib: the plot comes back as a PNG image and is saved under /app/images/', async () => {
        const { result, text } = await execute(
            "import matplotlib\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()");
        assert.notEqual(result.isError, true, text);
        const images = result.content.filter(c => c.type === 'image');
        assert.equal(images.length, 1, JSON.stringify(result.content.map(c => c.type)));
        assert.equal(images[0].mimeType, 'image/png');
        const bytes = Buffer.from(images[0].data, 'base64');
        assert.ok(bytes.length > PNG_SIGNATURE.length);
        assert.deepEqual(bytes.subarray(0, 8), PNG_SIGNATURE);
        const m = text.match(/\/app\/(images\/[A-Za-z0-9_.-]+\.png)/);
        assert.ok(m, `the text names the saved file: ${text}`);
        const saved = path.join(workspace, m[1]);
        assert.ok(fs.existsSync(saved), `${saved} exists`);
        assert.deepEqual(fs.readFileSync(saved), bytes);
        const onDisk = fs.readdirSync(path.join(workspace, 'images')).filter(f => f.endsWith('.png'));
        assert.equal(onDisk.length, 1, onDisk.join(', '));
    });

    it('upload_file: a host file becomes readable in a cell', async () => {
        const src = path.join(host, 'input.txt');
        fs.writeFileSync(src, 'hello from the host\n');
        const up = await client.callTool({ name: 'upload_file', arguments: { relpath: 'data/input.txt', local_path: src } });
        assert.notEqual(up.isError, true, textOf(up));
        assert.equal(fs.readFileSync(path.join(workspace, 'data', 'input.txt'), 'utf8'), 'hello from the host\n');
        const { result, text } = await execute("print(open('/app/data/input.txt').read().upper(), end='')");
        assert.notEqual(result.isError, true, text);
        assert.equal(text, 'HELLO FROM THE HOST\n');
    });

    it('download_file: a file created by a cell arrives on the host', async () => {
        const made = await execute("import os\nos.makedirs('out', exist_ok=True)\n"
            + "open('/app/out/result.txt', 'w').write('result: ' + str(6 * 7))");
        assert.notEqual(made.result.isError, true, made.text);
        const dst = path.join(host, 'downloaded', 'result.txt');
        const down = await client.callTool({ name: 'download_file', arguments: { relpath: 'out/result.txt', local_path: dst } });
        assert.notEqual(down.isError, true, textOf(down));
        assert.equal(fs.readFileSync(dst, 'utf8'), 'result: 42');
    });

    it('reset: clears variables but keeps files in /app', async () => {
        const set = await execute("kept_var = 'v'\nopen('/app/keep.txt', 'w').write('still here')");
        assert.notEqual(set.result.isError, true, set.text);
        const r = await client.callTool({ name: 'reset', arguments: {} });
        assert.notEqual(r.isError, true, textOf(r));
        const gone = await execute('kept_var');
        assert.equal(gone.result.isError, true, gone.text);
        assert.match(gone.text, /NameError/);
        const x = await execute('x');
        assert.equal(x.result.isError, true, x.text);
        assert.match(x.text, /NameError/);
        const file = await execute("print(open('/app/keep.txt').read())");
        assert.notEqual(file.result.isError, true, file.text);
        assert.equal(file.text.trim(), 'still here');
    });

    it('timeout: a long cell is interrupted, and the next cell still works', async () => {
        const started = Date.now();
        const { result, text } = await execute('import time\ntime.sleep(30)', { timeout: 1 });
        const elapsed = Date.now() - started;
        assert.equal(result.isError, true, text);
        assert.match(text, /timed out/i);
        assert.ok(elapsed < 20000, `the call returned after ${elapsed} ms`);
        const next = await execute('1 + 1');
        assert.notEqual(next.result.isError, true, next.text);
        assert.equal(next.text.trim(), '2');
    });

    it('progress: output is streamed as progress notifications before the result', async () => {
        const events = [];
        let resultArrived = false;
        const code = 'import time\nfor i in range(3):\n    print(f"line {i}", flush=True)\n    time.sleep(0.2)';
        const { result, text } = await execute(code, {}, {
            onprogress: p => { events.push({ ...p, beforeResult: !resultArrived }); },
        });
        resultArrived = true;
        assert.notEqual(result.isError, true, text);
        assert.equal(text, 'line 0\nline 1\nline 2\n');
        const withText = events.filter(e => typeof e.message === 'string' && /line \d/.test(e.message));
        assert.ok(withText.length >= 1, `progress notifications: ${JSON.stringify(events)}`);
        assert.ok(withText.every(e => e.beforeResult), JSON.stringify(events));
        // The streamed text is the cell's output, in order.
        assert.equal(events.map(e => e.message ?? '').join(''), 'line 0\nline 1\nline 2\n');
        for (let i = 1; i < events.length; i++) {
            assert.ok(events[i].progress > events[i - 1].progress, `progress increases: ${JSON.stringify(events)}`);
        }
        // On the wire, the notifications came before the response.
        const lastProgress = received.findLastIndex(m => m.method === 'notifications/progress');
        const lastResult = received.findLastIndex(m => m.result && Array.isArray(m.result.content));
        assert.ok(lastProgress >= 0 && lastProgress < lastResult);
    });

    it('an unknown tool is a JSON-RPC error: the SDK throws McpError(InvalidParams)', async () => {
        await assert.rejects(
            client.callTool({ name: 'no_such_tool', arguments: {} }),
            err => {
                assert.ok(err instanceof McpError, `got ${err}`);
                assert.equal(err.code, ErrorCode.InvalidParams);
                assert.match(err.message, /Unknown tool/);
                assert.match(err.message, /no_such_tool/);
                return true;
            });
        // The connection is still usable.
        const { text } = await execute('x = 1\nx');
        assert.equal(text.trim(), '1');
    });

    it('close: the client closes and the server process exits by itself', async () => {
        let closed = false;
        client.onclose = () => { closed = true; };
        const started = Date.now();
        await client.close();
        const { code, signal } = await Promise.race([
            childExit,
            new Promise((_, reject) => setTimeout(() => reject(new Error('the server did not exit')), 10000).unref()),
        ]);
        const elapsed = Date.now() - started;
        assert.equal(closed, true, 'client.onclose ran');
        // StdioClientTransport.close() ends stdin, waits 2 s, then sends SIGTERM: exiting with 0 and no
        // signal means the server stopped on its own at end of input.
        assert.equal(signal, null, `the server was killed by ${signal}`);
        assert.equal(code, 0);
        assert.ok(elapsed < 2000, `the server took ${elapsed} ms to exit`);
        assert.throws(() => process.kill(child.pid, 0), { code: 'ESRCH' });
    });
});
