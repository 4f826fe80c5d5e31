/* `ipybox doctor`: each check says in one line what works, or what does not and how to fix
 * it. A check that `ipybox mcp` cannot start without fails; an optional one only warns. */
#pragma once
#include <stdbool.h>

#include "options.h"

enum doctor_level { DOCTOR_OK, DOCTOR_WARN, DOCTOR_FAIL, DOCTOR_SKIP };

typedef struct doctor {
    int failed, warned;
} doctor;

/* Prints one line: "ok", "warn", "FAIL" or "skip", the check's name, then the sentence. */
void doctor_say(doctor *d, enum doctor_level level, const char *check, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* doctor_host.c. Each returns whether the check passed (warnings pass). */
bool doctor_check_userns(doctor *d);
bool doctor_check_nftables(doctor *d, bool userns_ok);
/* With the limits o asks for, example values for the others. */
void doctor_check_cgroups(doctor *d, const ipb_options *o);
/* doctor_python.c: ipykernel (needed), matplotlib and pip (optional) in this interpreter. */
bool doctor_check_python(doctor *d, const char *python);
