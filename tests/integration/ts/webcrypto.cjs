// Preloaded (node --require) into server-everything by tests/lib/mcp_servers.py. The MCP
// TypeScript SDK's Streamable HTTP server calls the global `crypto` (crypto.randomUUID()), which
// Node.js has by default from version 19 on; Debian 12's Node.js is 18, where the same object is
// require('node:crypto').webcrypto. On newer Node.js this does nothing.
'use strict';
if (typeof globalThis.crypto === 'undefined') {
  Object.defineProperty(globalThis, 'crypto', {
    value: require('node:crypto').webcrypto, writable: true, configurable: true, enumerable: false,
  });
}
