#include "cli.h"
#include "log.h"

int cmd_mcp(int argc, char **argv) {
    (void)argc;
    (void)argv;
    log_error("not yet");
    return 1;
}
