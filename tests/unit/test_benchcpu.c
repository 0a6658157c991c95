/* Tests of bench/cpu.sh, `make bench`'s CPU per unit (docs/PERFORMANCE.md, Method): run as a child
 * with this process standing in for the postmaster, rungd and the load generator, it reports the CPU
 * this process burnt between `begin` and `end UNITS`, per unit, and {} when it cannot tell. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "tap.h"

static char dir[] = "/tmp/rung-test-benchcpu.XXXXXX";

/* `bench/cpu.sh ARGS` with the environment set up by main; its stdout (heap, caller frees). */
static char *cpu_sh(const char *args)
{
	char cmd[512], *out = calloc(1, 4096);
	size_t n = 0, got;
	FILE *p;

	snprintf(cmd, sizeof cmd, "bench/cpu.sh %s", args);
	p = popen(cmd, "r");
	while (p && out && n < 4095 && (got = fread(out + n, 1, 4095 - n, p)) > 0)
		n += got;
	if (p)
		pclose(p);
	if (out && n > 0 && out[n - 1] == '\n')
		out[n - 1] = '\0';
	return out;
}

/* Burns about `secs` of this process's CPU (work, not a sleep: the script reads CPU time). */
static void burn(double secs)
{
	volatile unsigned long x = 0;
	clock_t t0 = clock();

	while ((double)(clock() - t0) / CLOCKS_PER_SEC < secs)
		for (int i = 0; i < 100000; i++)
			x += (unsigned long)i * 2654435761u;
}

static double num(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : -1;
}

int main(void)
{
	char path[256], pid[32], *s;
	FILE *f;
	json_t *o;

	if (!mkdtemp(dir)) {
		TAP_OK(0, "a temporary directory");
		return TAP_DONE();
	}
	/* this process is "the postmaster" (its children: the shell running the script), rungd and the
	 * load generator */
	snprintf(pid, sizeof pid, "%ld", (long)getpid());
	snprintf(path, sizeof path, "%s/postmaster.pid", dir);
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "%s\n%s\n", pid, dir);
		fclose(f);
	}
	setenv("PG_DIR", dir, 1);
	setenv("RUNGD_PID", pid, 1);
	setenv("RUNG_BENCH_PID", pid, 1);
	snprintf(path, sizeof path, "%s/state", dir);
	setenv("CPU_STATE", path, 1);

	s = cpu_sh("end 100");
	TAP_STR_EQ(s, "{}", "end without a begin: no per-unit figure");
	free(s);

	free(cpu_sh("begin"));
	burn(0.3);
	s = cpu_sh("end 100");
	o = json_loads(s, 0, NULL);
	TAP_OK(json_is_object(o), "end prints one JSON object");
	/* 0.3 s over 100 units is 3 ms each, counted in 10 ms ticks */
	TAP_OK(num(o, "cpu_rungd_ms") >= 2.5 && num(o, "cpu_rungd_ms") <= 6, "rungd's CPU per unit is what this process burnt");
	TAP_OK(num(o, "cpu_loadgen_ms") >= 2.5, "the load generator found through RUNG_BENCH_PID");
	TAP_OK(num(o, "cpu_postgres_ms") >= 2.5, "the postmaster's own CPU counts for Postgres");
	TAP_OK(num(o, "cpu_total_ms") >= num(o, "cpu_postgres_ms") + num(o, "cpu_rungd_ms") + num(o, "cpu_loadgen_ms") - 0.01,
	       "the total is the three together");
	json_decref(o);
	free(s);
	s = cpu_sh("end 100");
	TAP_STR_EQ(s, "{}", "a begin serves one end only");
	free(s);

	free(cpu_sh("begin"));
	s = cpu_sh("end 0");
	TAP_STR_EQ(s, "{}", "a window that completed nothing has no per-unit figure");
	free(s);

	setenv("RUNGD_PID", "999999999", 1); /* no such process: counts 0, the rest still measured */
	free(cpu_sh("begin"));
	burn(0.1);
	s = cpu_sh("end 10");
	o = json_loads(s, 0, NULL);
	TAP_OK(num(o, "cpu_rungd_ms") == 0 && num(o, "cpu_loadgen_ms") > 0, "a process that is gone counts 0");
	json_decref(o);
	free(s);

	snprintf(path, sizeof path, "rm -rf '%s'", dir);
	TAP_OK(system(path) == 0, "the temporary directory removed");
	return TAP_DONE();
}
