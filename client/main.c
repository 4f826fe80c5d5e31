/* ipybox: the command line. `ipybox mcp` (MCP server over stdio with the embedded
 * supervisor) and `ipybox run` (a command in a fresh sandbox). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "daemon.h"
#include "log.h"
#include "nofile.h"
#include "version.h"

static void usage(FILE *f) {
    fprintf(f, "Usage: ipybox COMMAND [OPTIONS]\n\n"
               "A Linux-native sandbox for stateful IPython kernels, driven over MCP.\n\n"
               "Commands:\n"
               "  mcp    MCP server on stdin/stdout for desktop agents: a stateful IPython kernel in a\n"
               "         sandbox, with the tools execute_ipython_cell, upload_file, download_file, reset,\n"
               "         register_mcp_server.\n"
               "         Client configuration: {\"command\": \"ipybox\", \"args\": [\"mcp\"]}\n"
               "  run    Run a command in a fresh sandbox: ipybox run [OPTIONS] -- COMMAND [ARGS...]\n"
               "  workspaces  List the workspaces (/app of sessions) under your state directory;\n"
               "         ipybox workspaces prune [--older-than DAYS] removes unnamed ones not in use.\n"
               "  doctor Check that ipybox mcp can start here; says how to fix what cannot.\n\n"
               "`ipybox COMMAND --help` explains the options of each command; `ipybox --version` prints\n"
               "the version.\n");
}

int cli_parse_options(ipb_options *o, int argc, char **argv, const char *prog, void (*print_usage)(FILE *),
                      int *ret_next) {
    ipb_error *err = NULL;
    ipb_options_init(o);
    o->run_only_ok = !strcmp(prog, "ipybox run");
    if (ipb_options_parse(o, argc, argv, ret_next, &err) < 0) {
        log_error("%s", ipb_error_msg(err));
        ipb_error_free(err);
        return 3;
    }
    if (o->help) {
        print_usage(stdout);
        return 1;
    }
    ipb_log_init(prog, o->verbose >= 2 ? IPB_LOG_DEBUG : o->verbose ? IPB_LOG_INFO : IPB_LOG_WARN);
    if (ipb_options_finish(o, getenv("HOME"), &err) < 0) {
        log_error("%s", ipb_error_msg(err));
        ipb_error_free(err);
        return 3;
    }
    cli_warn_unsupported(o);
    return 0;
}

void cli_warn_unsupported(const ipb_options *o) {
    if (o->container_tag)
        log_warn("--container-tag %s ignored: ipybox-native uses no Docker image (see --rootfs)", o->container_tag);
}

int main(int argc, char **argv) {
    ipb_log_init("ipybox", IPB_LOG_INFO);
    /* Large blocks (a cell's megabytes of output, in libzmq's receive buffers above all) are
     * mapped on their own and go back to the system when freed. By default glibc raises this
     * threshold after the first such free; a 20 MB message then stayed in the heap of
     * libzmq's I/O thread after the cell (which costs ~5% of streaming throughput to avoid). */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    /* The supervisor, the daemon and the monitor (this binary, each) hold a descriptor per
     * connection, relay, pipe and sandbox: the soft limit goes up to the hard one. */
    ipb_nofile_raise();
    const char *base = strrchr(argv[0], '/');
    if (!strcmp(base ? base + 1 : argv[0], "ipyboxd"))
        return ipbd_main(argc, argv);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "mcp"))
        return cmd_mcp(argc - 2, argv + 2);
    if (!strcmp(cmd, "run"))
        return cmd_run(argc - 2, argv + 2);
    if (!strcmp(cmd, "workspaces"))
        return cmd_workspaces(argc - 2, argv + 2);
    if (!strcmp(cmd, "doctor"))
        return cmd_doctor(argc - 2, argv + 2);
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        printf("ipybox %s\n", IPYBOX_VERSION);
        return 0;
    }
    log_error("unknown command '%s'", cmd);
    usage(stderr);
    return 2;
}
