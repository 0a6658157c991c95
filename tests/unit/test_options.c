/* Unit tests of common/options.c, the generic loader: env names (given or derived), defaults,
 * precedence flag > env > file > default, sources, validation errors naming their origin,
 * OPTIONS_NO_FILE, the config option, --help, --version and the usage text. */
#include <stdlib.h>
#include <unistd.h>

#include "tap.h"
#include "../../common/options.h"

enum { T_NAME, T_COUNT, T_FLAG, T_SECRET, T_CONF, T_N };

static const struct options_desc table[T_N] = {
	[T_NAME] = { "name", OPTIONS_STR, "NAME", "dflt", "a name", "RUNG_TEST_OPT_NAME", 0, 0, 0, NULL },
	[T_COUNT] = { "item-count", OPTIONS_INT, "N", "5", "a count", NULL, 1, 10, 0, NULL },
	[T_FLAG] = { "fast", OPTIONS_BOOL, NULL, "false", "a switch", NULL, 0, 0, 0, NULL },
	[T_SECRET] = { "secret", OPTIONS_STR, "S", NULL, "not in files", NULL, 0, 0, OPTIONS_NO_FILE, "computed" },
	[T_CONF] = { "conf", OPTIONS_STR, "FILE", NULL, "the file", NULL, 0, 0, OPTIONS_CONFIG, NULL },
};

static char tmpl[] = "/tmp/rung-test-options.XXXXXX";

static void write_file(const char *text)
{
	FILE *f = fopen(tmpl, "w");
	fputs(text, f);
	fclose(f);
}

/* Loads into a fresh *o with args (NULL-terminated); *err replaced. */
static enum options_result load(struct options *o, char **err, const char *const *args)
{
	char *argv[16] = { (char *)"prog" };
	int argc = 1;

	for (; args && args[argc - 1]; argc++)
		argv[argc] = (char *)args[argc - 1];
	free(*err);
	*err = NULL;
	options_release(o);
	options_init(o, table, T_N);
	return options_load(o, argc, argv, err);
}

static bool has(const char *s, const char *sub)
{
	return s && strstr(s, sub);
}

int main(void)
{
	struct options o = { 0 };
	char *err = NULL, env[64];
	int fd = mkstemp(tmpl);

	close(fd);
	options_env_name(&table[T_COUNT], env, sizeof env);
	TAP_STR_EQ(env, "RUNG_ITEM_COUNT", "derived env name: RUNG_ + upper case, dashes as underscores");
	options_env_name(&table[T_NAME], env, sizeof env);
	TAP_STR_EQ(env, "RUNG_TEST_OPT_NAME", "an explicit env name is kept");
	options_env_name(&table[T_COUNT], env, 8);
	TAP_STR_EQ(env, "RUNG_IT", "env name truncated to the buffer");

	TAP_INT_EQ(load(&o, &err, NULL), OPTIONS_OK, "no arguments load");
	TAP_STR_EQ(options_str(&o, T_NAME), "dflt", "string default");
	TAP_INT_EQ(options_int(&o, T_COUNT), 5, "int default");
	TAP_OK(!options_bool(&o, T_FLAG), "bool default");
	TAP_OK(options_str(&o, T_SECRET) == NULL && options_source(&o, T_SECRET) == NULL, "no default: unset");
	TAP_STR_EQ(options_source(&o, T_COUNT), "default", "source of a default");

	write_file("# c\nname = \"from file\"\nitem-count = 7\nfast = on\n");
	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--conf", tmpl, NULL }), OPTIONS_OK, "file loads");
	TAP_STR_EQ(options_str(&o, T_NAME), "from file", "file string, quotes removed");
	TAP_INT_EQ(options_int(&o, T_COUNT), 7, "file int");
	TAP_OK(options_bool(&o, T_FLAG), "file bool");
	TAP_STR_EQ(options_str(&o, T_CONF), tmpl, "config option holds the file read");
	TAP_OK(has(options_source(&o, T_COUNT), ":3"), "source of a file value is FILE:LINE");

	setenv("RUNG_ITEM_COUNT", "8", 1);
	setenv("RUNG_TEST_OPT_NAME", "from env", 1);
	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--conf", tmpl, NULL }), OPTIONS_OK, "env + file load");
	TAP_INT_EQ(options_int(&o, T_COUNT), 8, "env beats file");
	TAP_STR_EQ(options_str(&o, T_NAME), "from env", "explicit env name read");
	TAP_STR_EQ(options_source(&o, T_COUNT), "RUNG_ITEM_COUNT", "source of an env value");
	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--conf", tmpl, "--item-count", "9", "--name=flag", NULL }),
		   OPTIONS_OK, "flags load");
	TAP_INT_EQ(options_int(&o, T_COUNT), 9, "flag beats env");
	TAP_STR_EQ(options_str(&o, T_NAME), "flag", "--flag=value beats env");
	TAP_STR_EQ(options_source(&o, T_COUNT), "--item-count", "source of a flag value");
	setenv("RUNG_ITEM_COUNT", "", 1);
	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--conf", tmpl, NULL }), OPTIONS_OK, "empty env ignored");
	TAP_INT_EQ(options_int(&o, T_COUNT), 7, "empty env leaves the file value");
	unsetenv("RUNG_ITEM_COUNT");
	unsetenv("RUNG_TEST_OPT_NAME");

	setenv("RUNG_CONF", tmpl, 1);
	TAP_INT_EQ(load(&o, &err, NULL), OPTIONS_OK, "config file named by its variable");
	TAP_INT_EQ(options_int(&o, T_COUNT), 7, "variable's file read");
	TAP_STR_EQ(options_source(&o, T_CONF), "RUNG_CONF", "config source is the variable");
	unsetenv("RUNG_CONF");

	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--fast", "--name", "", NULL }), OPTIONS_OK, "bare bool");
	TAP_OK(options_bool(&o, T_FLAG), "bare bool flag is true");
	TAP_OK(options_str(&o, T_NAME) == NULL, "empty string value unsets");
	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--fast=no", NULL }), OPTIONS_OK, "--bool=no");
	TAP_OK(!options_bool(&o, T_FLAG), "--bool=no is false");

	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--item-count", "11", NULL }), OPTIONS_ERROR, "above max");
	TAP_OK(has(err, "--item-count") && has(err, "1 to 10") && has(err, "\"11\""), "range error names the flag");
	setenv("RUNG_ITEM_COUNT", "0x3", 1);
	TAP_INT_EQ(load(&o, &err, NULL), OPTIONS_ERROR, "non-decimal env refused");
	TAP_OK(has(err, "RUNG_ITEM_COUNT:"), "env error names the variable");
	unsetenv("RUNG_ITEM_COUNT");
	setenv("RUNG_FAST", "maybe", 1);
	TAP_INT_EQ(load(&o, &err, NULL), OPTIONS_ERROR, "bad bool env refused");
	TAP_OK(has(err, "RUNG_FAST") && has(err, "true or false"), "bool error names the variable");
	unsetenv("RUNG_FAST");

	write_file("name = x\nsecret = y\n");
	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--conf", tmpl, NULL }), OPTIONS_ERROR, "no-file key refused");
	TAP_OK(has(err, ":2:") && has(err, "secret cannot be set in a config file"), "no-file error has FILE:2");
	write_file("conf = /x\n");
	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--conf", tmpl, NULL }), OPTIONS_ERROR, "config key refused");
	write_file("nope = 1\n");
	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--conf", tmpl, NULL }), OPTIONS_ERROR, "unknown key refused");
	TAP_OK(has(err, ":1:") && has(err, "unknown key \"nope\""), "unknown key error has FILE:1");
	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--conf", "/nonexistent/x.conf", NULL }), OPTIONS_ERROR,
		   "missing file refused");
	TAP_OK(has(err, "/nonexistent/x.conf"), "missing file named");

	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--bogus", NULL }), OPTIONS_ERROR, "unknown flag refused");
	TAP_OK(has(err, "--bogus"), "unknown flag named");
	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--name", NULL }), OPTIONS_ERROR, "missing value refused");
	TAP_OK(has(err, "--name needs a value"), "missing value named");
	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "x", NULL }), OPTIONS_ERROR, "positional refused");
	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--item-count", "99", "--help", NULL }), OPTIONS_HELP,
		   "--help wins over an earlier bad value");
	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--version", NULL }), OPTIONS_VERSION, "--version");
	setenv("RUNG_ITEM_COUNT", "many", 1);
	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--item-count", "99", "--version", "--item-count", NULL }),
		   OPTIONS_VERSION, "--version wins over bad values before and after it and in the environment");
	unsetenv("RUNG_ITEM_COUNT");
	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--bogus", "--version", NULL }), OPTIONS_ERROR,
		   "an unknown flag before --version is still refused");
	TAP_INT_EQ(load(&o, &err, (const char *const[]){ "--version=1", NULL }), OPTIONS_ERROR,
		   "--version takes no value");

	{
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		options_usage(f, table, T_N);
		fclose(f);
		TAP_OK(has(buf, "--item-count N") && has(buf, "(RUNG_ITEM_COUNT; default 5)") &&
		       has(buf, "(RUNG_TEST_OPT_NAME; default dflt)") && has(buf, "(RUNG_SECRET; default computed)") &&
		       has(buf, "(RUNG_CONF; default none)") && has(buf, "--fast ") && has(buf, "Precedence") &&
		       has(buf, "--version"),
		       "usage lists flags, variables and defaults");
		free(buf);
	}
	options_release(&o);
	options_release(&o);
	free(err);
	unlink(tmpl);
	return TAP_DONE();
}
