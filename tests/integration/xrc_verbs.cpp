// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// xrc_verbs: XRC through the public verbs API (xrc_verbs.h says what each mode checks).
#include "tests/integration/xrc_verbs.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace xrc_test;

int main(int argc, char** argv) {
    g_role = "main";
    if (argc < 5) {
        std::fprintf(stderr, "usage: %s DEVICE UROCE_CLI rules|share WORKDIR\n", argv[0]);
        return 2;
    }
    g_dev = argv[1];
    g_cli = argv[2];
    alarm(50);  // a hang (a lost event, a stuck destroy) kills us instead of the CI job
    const std::string mode = argv[3], dir = argv[4];
    int failures;
    if (mode == "role-a" && argc == 6) return role_a(std::atoi(argv[5]), dir);
    if (mode == "role-b" && argc == 6) return role_b(std::atoi(argv[5]), dir);
    if (mode == "rules")
        failures = run_rules(dir);
    else if (mode == "share")
        failures = run_share("/proc/self/exe", dir);
    else
        return 2;
    if (failures) {
        std::fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    std::printf("all checks passed\n");
    return 0;
}
