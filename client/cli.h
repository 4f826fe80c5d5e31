#pragma once
#include <stdio.h>

#include "options.h"

int cmd_run(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
/* `ipybox workspaces [prune]` (workspaces_cmd.c) */
int cmd_workspaces(int argc, char **argv);
/* `ipybox doctor` (doctor.c). */
int cmd_doctor(int argc, char **argv);
/* Parses a subcommand's options and fills defaults. Returns 0 to go on, or an exit code + 1
 * (so 1 means exit 0 after --help, 3 means exit 2 after an error). *ret_next is the index
 * of the first word after the options. */
int cli_parse_options(ipb_options *o, int argc, char **argv, const char *prog, void (*usage)(FILE *), int *ret_next);
/* Warns about accepted options that have no effect yet. */
void cli_warn_unsupported(const ipb_options *o);

/* `ipybox run` started as a sandboxed MCP server (run_mcp.c): answers the client's first
 * request with an error saying why the sandbox could not be made. Does nothing otherwise. */
void cli_run_mcp_refuse(const char *why);

/* A connected socket to the daemon at path, or -1 with errno: ETIMEDOUT when the daemon did
 * not take the connection within CLI_CONNECT_TIMEOUT_MS (or IPYBOX_CONNECT_TIMEOUT, if
 * shorter): its listen queue is full, it does not accept. */
#define CLI_CONNECT_TIMEOUT_MS 5000
int cli_daemon_connect(const char *path);
/* How long cli_daemon_connect waits for the daemon to take the connection, in ms. */
int cli_connect_timeout_ms(void);
/* `ipybox mcp` through a daemon: a session for this connection with these sandbox options,
 * then stdio <-> socket. Returns the exit code. */
int cli_bridge(int fd, const char *path, int argc, char **argv);
/* Relays stdio and a daemon session's socket until either ends (relay.c). */
int cli_relay(int fd);
/* cli_bridge's result when the daemon did not answer createSession in time. */
#define CLI_BRIDGE_NO_ANSWER (-1)
