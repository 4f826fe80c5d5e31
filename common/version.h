/* The one version of ipybox-native: `ipybox --version`, `ipyboxd --version`, serverInfo and the
 * MCP client's clientInfo. The Python SDK's __version__ (sdk/python/ipybox_native/__init__.py)
 * is kept equal (tests/integration/test_rough_edges.py checks). */
#ifndef IPB_VERSION_H
#define IPB_VERSION_H

#define IPYBOX_VERSION "0.1.0"

#endif
