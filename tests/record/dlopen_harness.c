/* Loads the injection library the way the driver does (dlopen + InitializeInjection) in a
 * process with no usable GPU: it must print at most a line or two, return, and let the
 * program exit normally without leaving files behind. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("dlopen: %s\n", dlerror());
        return 3;
    }
    int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
    if (!init) return 4;
    int r = init();
    printf("InitializeInjection returned %d\n", r);
    printf("program still running\n");
    return r == 1 ? 0 : 5;
}
