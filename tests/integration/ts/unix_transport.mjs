// An MCP client transport over a unix stream socket (the SDK's `Transport` interface), for
// `ipyboxd`'s control socket. The framing is the SDK's own stdio framing (ReadBuffer,
// serializeMessage): the daemon speaks MCP's stdio protocol, newline-delimited JSON-RPC.
import net from 'node:net';

import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';

/** An MCP client transport over a unix stream socket (the SDK's `Transport` interface). */
export class UnixSocketClientTransport {
    constructor(socketPath) {
        this._path = socketPath;
        this._readBuffer = new ReadBuffer();
        this._socket = undefined;
        this._closed = false;
        this.protocolVersion = undefined;
        this.closeForced = false; // close() had to destroy the socket: the server did not end its side
        this.onclose = undefined;
        this.onerror = undefined;
        this.onmessage = undefined;
    }

    start() {
        if (this._socket) {
            throw new Error('UnixSocketClientTransport already started (Client.connect() calls start())');
        }
        return new Promise((resolve, reject) => {
            const socket = net.createConnection(this._path);
            this._socket = socket;
            const failed = error => {
                this._socket = undefined;
                reject(error);
            };
            socket.once('error', failed);
            socket.once('connect', () => {
                socket.off('error', failed);
                socket.on('error', error => this.onerror?.(error));
                resolve();
            });
            socket.on('data', chunk => {
                try {
                    this._readBuffer.append(chunk);
                } catch (error) { // a line over the buffer's limit: the stream cannot be resynchronised
                    this.onerror?.(error);
                    this.close().catch(() => {});
                    return;
                }
                this._processReadBuffer();
            });
            socket.on('close', () => this._closedBySocket());
        });
    }

    _processReadBuffer() {
        for (;;) {
            let message;
            try {
                message = this._readBuffer.readMessage();
            } catch (error) { // one bad line (already consumed): report it and go on with the next
                this.onerror?.(error);
                continue;
            }
            if (message === null) break;
            this.onmessage?.(message);
        }
    }

    _closedBySocket() {
        this._socket = undefined;
        this._readBuffer.clear();
        if (!this._closed) {
            this._closed = true;
            this.onclose?.();
        }
    }

    send(message) {
        return new Promise((resolve, reject) => {
            const socket = this._socket;
            if (!socket || socket.destroyed || !socket.writable) {
                reject(new Error('Not connected'));
                return;
            }
            socket.write(serializeMessage(message), error => (error ? reject(error) : resolve()));
        });
    }

    async close() {
        const socket = this._socket;
        if (!socket) {
            this._closedBySocket();
            return;
        }
        const closed = new Promise(resolve => socket.once('close', resolve));
        socket.end();
        const timer = setTimeout(() => { this.closeForced = true; socket.destroy(); }, 5000);
        await closed;
        clearTimeout(timer);
    }

    setProtocolVersion(version) {
        this.protocolVersion = version;
    }
}
