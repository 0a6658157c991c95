/* bin/sim/nvidia-smi: a stand-in for NVIDIA's nvidia-smi on machines without a GPU. Reads the
 * simulated GPUs from RUNG_SIM_STATE (sim/simgpu.h) and answers --query-gpu, --query-compute-apps
 * (csv with or without header/units), -L, -i and the plain table in the real tool's formats,
 * including its error wording and exit code 2 for unknown fields. Writes nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "simgpu.h"
#include "util.h"

#define NVSMI_DRIVER "550.54.14"
#define NVSMI_CUDA "12.4"
#define NVSMI_MAX_FIELDS 32

enum nvsmi_mode { NVSMI_TABLE, NVSMI_LIST, NVSMI_QUERY_GPU, NVSMI_QUERY_APPS };

enum nvsmi_field {
	F_INDEX, F_UUID, F_NAME, F_COUNT, F_DRIVER, F_BUS_ID, F_MEM_TOTAL, F_MEM_USED, F_MEM_FREE,
	F_MEM_RESERVED, F_UTIL_GPU, F_UTIL_MEM, F_TEMP, F_PID, F_PROC_NAME, F_USED_MEM, F_SERIAL
};

struct nvsmi_field_def {
	const char *name;   /* as accepted on the command line */
	const char *header; /* the csv header the real tool prints for it */
	enum nvsmi_field f;
	const char *unit;   /* "MiB", "%" or NULL */
};

static const struct nvsmi_field_def nvsmi_gpu_fields[] = {
	{ "index", "index", F_INDEX, NULL },
	{ "uuid", "uuid", F_UUID, NULL },
	{ "gpu_uuid", "uuid", F_UUID, NULL },
	{ "name", "name", F_NAME, NULL },
	{ "gpu_name", "name", F_NAME, NULL },
	{ "count", "count", F_COUNT, NULL },
	{ "driver_version", "driver_version", F_DRIVER, NULL },
	{ "pci.bus_id", "pci.bus_id", F_BUS_ID, NULL },
	{ "gpu_bus_id", "pci.bus_id", F_BUS_ID, NULL },
	{ "serial", "serial", F_SERIAL, NULL },
	{ "memory.total", "memory.total", F_MEM_TOTAL, "MiB" },
	{ "memory.used", "memory.used", F_MEM_USED, "MiB" },
	{ "memory.free", "memory.free", F_MEM_FREE, "MiB" },
	{ "memory.reserved", "memory.reserved", F_MEM_RESERVED, "MiB" },
	{ "utilization.gpu", "utilization.gpu", F_UTIL_GPU, "%" },
	{ "utilization.memory", "utilization.memory", F_UTIL_MEM, "%" },
	{ "temperature.gpu", "temperature.gpu", F_TEMP, NULL },
};

static const struct nvsmi_field_def nvsmi_app_fields[] = {
	{ "gpu_uuid", "gpu_uuid", F_UUID, NULL },
	{ "gpu_name", "gpu_name", F_NAME, NULL },
	{ "gpu_bus_id", "gpu_bus_id", F_BUS_ID, NULL },
	{ "gpu_serial", "gpu_serial", F_SERIAL, NULL },
	{ "pid", "pid", F_PID, NULL },
	{ "process_name", "process_name", F_PROC_NAME, NULL },
	{ "name", "process_name", F_PROC_NAME, NULL },
	{ "used_memory", "used_gpu_memory", F_USED_MEM, "MiB" },
	{ "used_gpu_memory", "used_gpu_memory", F_USED_MEM, "MiB" },
};

struct nvsmi_opts {
	enum nvsmi_mode mode;
	const char *query;  /* the field list as given */
	const char *format; /* "csv", "csv,noheader,nounits", ... or NULL */
	const char *id;     /* -i: index or uuid, NULL for all */
	int header, units;
};

static void nvsmi_usage_error(const char *msg)
{
	printf("%s\n\nPlease run 'nvidia-smi -h' for help.\n\n", msg);
}

static int nvsmi_parse(int argc, char **argv, struct nvsmi_opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = NULL;
		size_t n;
#define NVSMI_OPT(name) (n = strlen(name), !strncmp(a, name, n) && (a[n] == '=' || a[n] == '\0'))
#define NVSMI_VAL() (a[n] == '=' ? a + n + 1 : (i + 1 < argc ? argv[++i] : NULL))
		if (NVSMI_OPT("--query-gpu")) {
			o->mode = NVSMI_QUERY_GPU;
			val = o->query = NVSMI_VAL();
		} else if (NVSMI_OPT("--query-compute-apps")) {
			o->mode = NVSMI_QUERY_APPS;
			val = o->query = NVSMI_VAL();
		} else if (NVSMI_OPT("--format")) {
			val = o->format = NVSMI_VAL();
		} else if (NVSMI_OPT("--id")) {
			val = o->id = NVSMI_VAL();
		} else if (!strcmp(a, "-i")) {
			val = o->id = i + 1 < argc ? argv[++i] : NULL;
		} else if (!strcmp(a, "-L") || !strcmp(a, "--list-gpus")) {
			o->mode = NVSMI_LIST;
			continue;
		} else {
			char *msg = NULL;
			if (asprintf(&msg, "Invalid combination of input arguments. %s is not a valid option.", a) < 0)
				return -1;
			nvsmi_usage_error(msg);
			free(msg);
			return -1;
		}
#undef NVSMI_OPT
#undef NVSMI_VAL
		if (!val || !*val) {
			nvsmi_usage_error("Option requires an argument.");
			return -1;
		}
	}
	if (o->mode == NVSMI_QUERY_GPU || o->mode == NVSMI_QUERY_APPS) {
		if (!o->format) {
			nvsmi_usage_error("--format must be specified when using a --query option.");
			return -1;
		}
		char buf[256];
		snprintf(buf, sizeof(buf), "%s", o->format);
		o->header = 1;
		o->units = 1;
		int csv = 0;
		for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			while (*t == ' ')
				t++;
			if (!strcmp(t, "csv"))
				csv = 1;
			else if (!strcmp(t, "noheader"))
				o->header = 0;
			else if (!strcmp(t, "nounits"))
				o->units = 0;
			else {
				printf("\"%s\" is not a valid format option.\n\n", t);
				return -1;
			}
		}
		if (!csv) {
			printf("\"csv\" is a required format option.\n\n");
			return -1;
		}
	}
	return 0;
}

/* Resolves the comma-separated field list against DEFS; prints the real error on an unknown one. */
static int nvsmi_fields(const char *query, const struct nvsmi_field_def *defs, size_t ndefs,
	const struct nvsmi_field_def **out, size_t *nout)
{
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", query);
	*nout = 0;
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		while (*t == ' ')
			t++;
		size_t len = strlen(t);
		while (len && t[len - 1] == ' ')
			t[--len] = '\0';
		const struct nvsmi_field_def *hit = NULL;
		for (size_t i = 0; i < ndefs && !hit; i++)
			if (!strcmp(defs[i].name, t))
				hit = &defs[i];
		if (!hit) {
			printf("Field \"%s\" is not a valid field to query.\n\n", t);
			return -1;
		}
		if (*nout == NVSMI_MAX_FIELDS)
			return -1;
		out[(*nout)++] = hit;
	}
	return *nout ? 0 : -1;
}

static int nvsmi_selected(const struct nvsmi_opts *o, const struct simgpu_gpu *g, size_t idx)
{
	if (!o->id)
		return 1;
	char buf[32];
	snprintf(buf, sizeof(buf), "%zu", idx);
	return !strcmp(o->id, buf) || !strcmp(o->id, g->uuid);
}

static void nvsmi_value(const struct nvsmi_opts *o, const struct nvsmi_field_def *d,
	const struct simgpu_state *st, size_t idx, const struct simgpu_proc *p)
{
	const struct simgpu_gpu *g = &st->gpus[idx];
	long used = SIMGPU_BASELINE_MIB + simgpu_procs_mib(g);
	long num = -1;
	if (used > g->total_mib)
		used = g->total_mib;
	switch (d->f) {
	case F_INDEX: printf("%zu", idx); return;
	case F_UUID: printf("%s", g->uuid); return;
	case F_NAME: printf("%s", g->name); return;
	case F_COUNT: printf("%zu", st->ngpus); return;
	case F_DRIVER: printf("%s", NVSMI_DRIVER); return;
	case F_BUS_ID: printf("00000000:%02zX:00.0", idx + 1); return;
	case F_SERIAL: printf("%013zu", 1320000000000 + idx); return;
	case F_PROC_NAME: printf("%s", p ? p->name : ""); return;
	case F_PID: printf("%ld", p ? p->pid : 0L); return;
	case F_MEM_TOTAL: num = g->total_mib; break;
	case F_MEM_USED: num = used; break;
	case F_MEM_FREE: num = g->total_mib - used; break;
	case F_MEM_RESERVED: num = 0; break;
	case F_UTIL_GPU: num = g->nprocs ? 97 : 0; break;
	case F_UTIL_MEM: num = g->total_mib ? used * 100 / g->total_mib : 0; break;
	case F_TEMP: num = g->nprocs ? 71 : 34; break;
	case F_USED_MEM: num = p ? p->used_mib : 0; break;
	default: abort();
	}
	if (o->units && d->unit)
		printf(!strcmp(d->unit, "%") ? "%ld %%" : "%ld MiB", num);
	else
		printf("%ld", num);
}

static void nvsmi_header(const struct nvsmi_opts *o, const struct nvsmi_field_def **f, size_t nf)
{
	if (!o->header)
		return;
	for (size_t i = 0; i < nf; i++) {
		printf("%s%s", i ? ", " : "", f[i]->header);
		if (o->units && f[i]->unit)
			printf(" [%s]", f[i]->unit);
	}
	printf("\n");
}

static int nvsmi_query(const struct nvsmi_opts *o, const struct simgpu_state *st)
{
	const struct nvsmi_field_def *f[NVSMI_MAX_FIELDS];
	size_t nf = 0;
	int apps = o->mode == NVSMI_QUERY_APPS;

	if (apps ? nvsmi_fields(o->query, nvsmi_app_fields, ARRAY_LEN(nvsmi_app_fields), f, &nf) :
		nvsmi_fields(o->query, nvsmi_gpu_fields, ARRAY_LEN(nvsmi_gpu_fields), f, &nf))
		return 2;
	nvsmi_header(o, f, nf);
	for (size_t g = 0; g < st->ngpus; g++) {
		if (!nvsmi_selected(o, &st->gpus[g], g))
			continue;
		size_t rows = apps ? st->gpus[g].nprocs : 1;
		for (size_t r = 0; r < rows; r++) {
			for (size_t i = 0; i < nf; i++) {
				printf("%s", i ? ", " : "");
				nvsmi_value(o, f[i], st, g, apps ? &st->gpus[g].procs[r] : NULL);
			}
			printf("\n");
		}
	}
	return 0;
}

static void nvsmi_table(const struct nvsmi_opts *o, const struct simgpu_state *st)
{
	char when[64];
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%a %b %e %H:%M:%S %Y", &tm);
	printf("%s       \n", when);
	printf("+-----------------------------------------------------------------------------------------+\n");
	printf("| NVIDIA-SMI %-22s Driver Version: %-14s CUDA Version: %-9s|\n", NVSMI_DRIVER, NVSMI_DRIVER, NVSMI_CUDA);
	printf("|-----------------------------------------+------------------------+----------------------+\n");
	printf("| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n");
	printf("| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n");
	printf("|=========================================+========================+======================|\n");
	for (size_t g = 0; g < st->ngpus; g++) {
		const struct simgpu_gpu *gp = &st->gpus[g];
		long used = SIMGPU_BASELINE_MIB + simgpu_procs_mib(gp);
		char mem[64];
		if (!nvsmi_selected(o, gp, g))
			continue;
		snprintf(mem, sizeof(mem), "%ldMiB / %ldMiB", used > gp->total_mib ? gp->total_mib : used, gp->total_mib);
		printf("| %3zu  %-24.24s       Off | 00000000:%02zX:00.0   Off | %20s |\n", g, gp->name, g + 1, "Off");
		printf("| %3s   %2dC    %-4s %21s | %22s | %7d%%     Default |\n", "0%", gp->nprocs ? 71 : 34,
			gp->nprocs ? "P2" : "P8", "", mem, gp->nprocs ? 97 : 0);
		printf("+-----------------------------------------+------------------------+----------------------+\n");
	}
	printf("\n");
	printf("+-----------------------------------------------------------------------------------------+\n");
	printf("| Processes:                                                                              |\n");
	printf("|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |\n");
	printf("|        ID   ID                                                               Usage      |\n");
	printf("|=========================================================================================|\n");
	int any = 0;
	for (size_t g = 0; g < st->ngpus; g++) {
		if (!nvsmi_selected(o, &st->gpus[g], g))
			continue;
		for (size_t i = 0; i < st->gpus[g].nprocs; i++) {
			const struct simgpu_proc *p = &st->gpus[g].procs[i];
			char usage[32];
			snprintf(usage, sizeof(usage), "%ldMiB", p->used_mib);
			printf("|  %3zu   N/A  N/A  %9ld      C   %-40.40s %10s |\n", g, p->pid, p->name, usage);
			any = 1;
		}
	}
	if (!any)
		printf("|  No running processes found                                                             |\n");
	printf("+-----------------------------------------------------------------------------------------+\n");
}

int main(int argc, char **argv)
{
	struct nvsmi_opts o = { .mode = NVSMI_TABLE };
	struct simgpu_state st = { 0 };
	int rc = 0;

	if (nvsmi_parse(argc, argv, &o) != 0)
		return 2;
	if (simgpu_load(&st) != 0) {
		printf("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
			"Make sure that the latest NVIDIA driver is installed and running.\n\n");
		return 9;
	}
	if (o.id) {
		int found = 0;
		for (size_t g = 0; g < st.ngpus; g++)
			found |= nvsmi_selected(&o, &st.gpus[g], g);
		if (!found) {
			printf("No devices were found\n");
			rc = 6;
			goto out;
		}
	}
	switch (o.mode) {
	case NVSMI_LIST:
		for (size_t g = 0; g < st.ngpus; g++)
			if (nvsmi_selected(&o, &st.gpus[g], g))
				printf("GPU %zu: %s (UUID: %s)\n", g, st.gpus[g].name, st.gpus[g].uuid);
		break;
	case NVSMI_QUERY_GPU:
	case NVSMI_QUERY_APPS:
		rc = nvsmi_query(&o, &st);
		break;
	case NVSMI_TABLE:
		nvsmi_table(&o, &st);
		break;
	default:
		abort();
	}
out:
	fflush(stdout);
	simgpu_release(&st);
	return rc;
}
