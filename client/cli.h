#pragma once
#include "options.h"

int cmd_run(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
/* Warns about accepted options that have no effect yet. */
void cli_warn_unsupported(const ipb_options *o);
