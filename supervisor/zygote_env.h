/* Which kernel environments allow a zygote (architecture.md, "Zygote kernels"): none when a
 * variable makes a starting process load code, or parse files, from a path the sandbox may
 * write, since a zygote booted after a kernel wrote there would run it and fork every later
 * kernel from it. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

/* env: n "KEY=VALUE" strings. True when none of them refuses a zygote; otherwise false, with
 * the first refusing variable's name in why (NUL-terminated, at most size bytes). */
bool ipb_zygote_env_ok(char *const *env, size_t n, char *why, size_t size);
