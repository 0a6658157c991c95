/* rungctl's memory model commands (issue 12): `profiles` lists what rung learned per (arch, GPU
 * class) over GET /v1/profiles, `profiles reset ARCH GPU_CLASS` forgets one (support/admin), `plan`
 * asks what rung would do with a config before it is submitted (POST /v1/plan), and the memory
 * lines `show` prints from GET /v1/jobs/{id}/memory. The formatters are pure, for the tests. */
#ifndef RUNG_CMD_PROFILES_H
#define RUNG_CMD_PROFILES_H

#include <jansson.h>

struct cli;

/* Each returns a cli_exit code. */
int cmd_profiles(struct cli *c, int argc, char **argv);
int cmd_profiles_reset(struct cli *c, int argc, char **argv);
/* rungctl plan CONFIG [--gpu-mib N] [--no-scale-up] [--validate-steps N]: POST /v1/plan. */
int cmd_plan(struct cli *c, int argc, char **argv);

/* What `rungctl plan` prints for a POST /v1/plan answer (borrowed): a table of the GPU sizes (the
 * target's estimate, what the first attempt would run, what that needs), then, for each size where
 * rung would not run the config as submitted, the reason and the config changes; a heap string. */
char *cmd_plan_text(const json_t *plan);

/* The table `rungctl profiles` prints for the PROFILE list (borrowed); a heap string. */
char *cmd_profiles_table(const json_t *profiles);
/* The lines `rungctl show` prints for a GET /v1/jobs/{id}/memory answer (borrowed): the estimate of
 * the current config on the GPU, its evidence, and what the profile rests on; a heap string. */
char *cmd_memory_lines(const json_t *memory);

#endif
