/* A recorded tool for benchmarks: one small binary, like the real tools it stands in for (ethtool, nvidia-smi),
 * instead of the test trees' shell stubs (sh + cat per call). Same lookup as tests/hosttrees: argv joined by "_",
 * "/" and " " as "_", "_" alone for no arguments, "<key>@s1" in snapshot 1, "<key>.rc" for the exit status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    /* argv[0] is the bare name when the shell found us on PATH: locate the stub folder from /proc/self/exe. */
    char self[4096], dir[8192], key[8192] = "", path[16384];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 127;
    self[len] = 0;
    char *slash = strrchr(self, '/');
    const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    *slash = 0;
    snprintf(dir, sizeof dir, "%s/../out/%s", self, name);
    for (int i = 1; i < argc; i++) {
        if (i > 1) strncat(key, "_", sizeof key - strlen(key) - 1);
        strncat(key, argv[i], sizeof key - strlen(key) - 1);
    }
    if (!key[0]) strcpy(key, "_");
    for (char *c = key; *c; c++) if (*c == '/' || *c == ' ') *c = '_';
    const char *snap = getenv("FC_SNAPSHOT");
    FILE *f = NULL;
    if (snap && strcmp(snap, "1") == 0) {
        snprintf(path, sizeof path, "%s/%s@s1", dir, key);
        f = fopen(path, "rb");
    }
    if (!f) { snprintf(path, sizeof path, "%s/%s", dir, key); f = fopen(path, "rb"); }
    if (!f) { fprintf(stderr, "%s: no recorded output for: %s\n", name, key); return 1; }
    char buf[65536]; size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, stdout);
    fclose(f);
    strncat(path, ".rc", sizeof path - strlen(path) - 1);
    FILE *rc = fopen(path, "r");
    int status = 0;
    if (rc) { if (fscanf(rc, "%d", &status) != 1) status = 0; fclose(rc); }
    return status;
}
