/* Prints the credentials this process ended up with after exec, as JSON:
 * {"ruid":1000,"euid":1000,"suid":1000,"rgid":..,"egid":..,"sgid":..,
 *  "CapInh":"0000000000000000","CapPrm":"..","CapEff":"..","CapBnd":"..","CapAmb":"..",
 *  "NoNewPrivs":"1","Seccomp":"2"}
 * Copied with a setuid bit or a file capability, it shows whether exec granted anything. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    uid_t r, e, s;
    gid_t rg, eg, sg;
    getresuid(&r, &e, &s);
    getresgid(&rg, &eg, &sg);
    printf("{\"ruid\":%u,\"euid\":%u,\"suid\":%u,\"rgid\":%u,\"egid\":%u,\"sgid\":%u", r, e, s, rg, eg, sg);
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    static const char *const keys[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"};
    while (f && fgets(line, sizeof(line), f)) {
        for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++) {
            size_t k = strlen(keys[i]);
            if (!strncmp(line, keys[i], k) && line[k] == ':') {
                char *v = line + k + 1;
                while (*v == '\t' || *v == ' ')
                    v++;
                v[strcspn(v, "\n")] = '\0';
                printf(",\"%s\":\"%s\"", keys[i], v);
            }
        }
    }
    printf("}\n");
    return 0;
}
