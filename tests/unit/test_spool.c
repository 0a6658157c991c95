/* Unit tests for worker/spool: put/get/list/remove, temp files not listed, ids made safe. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../worker/spool.h"
#include "tap.h"
#include "util.h"

int main(void)
{
	char dir[] = "/tmp/rung-test-spool-XXXXXX", *sub, *err = NULL, **ids, *tmp, *safe;
	json_t *doc, *back;
	FILE *f;

	if (!mkdtemp(dir))
		return 1;
	sub = xasprintf("%s/a/b/spool", dir);
	TAP_INT_EQ(spool_mkdir_p(sub, &err), 0, "mkdir -p");
	TAP_INT_EQ(spool_mkdir_p(sub, &err), 0, "mkdir -p again");
	doc = json_pack("{s:i, s:s, s:{s:i}}", "attempt_id", 12, "token", "t", "facts", "exit_code", 1);
	TAP_INT_EQ(spool_put(sub, "12", doc, &err), 0, "put");
	TAP_INT_EQ(spool_put(sub, "3", doc, &err), 0, "put another");
	tmp = xasprintf("%s/.99.json.tmp", sub);
	f = fopen(tmp, "w");
	fputs("{", f);
	fclose(f);
	ids = spool_list(sub);
	TAP_OK(ids[0] && ids[1] && !ids[2] && !strcmp(ids[0], "12") && !strcmp(ids[1], "3"), "list: both, sorted, no temp");
	spool_list_free(ids);
	back = spool_get(sub, "12");
	TAP_OK(back && json_equal(back, doc), "get returns what was put");
	json_decref(back);
	spool_remove(sub, "12");
	spool_remove(sub, "12");
	ids = spool_list(sub);
	TAP_OK(ids[0] && !strcmp(ids[0], "3") && !ids[1], "remove (twice is fine)");
	spool_list_free(ids);
	TAP_INT_EQ(spool_put("/nonexistent/dir", "1", doc, &err), -1, "put into a missing dir fails");
	TAP_OK(err != NULL, "with an error");
	free(err);
	ids = spool_list("/nonexistent/dir");
	TAP_OK(ids[0] == NULL, "missing dir lists nothing");
	spool_list_free(ids);
	safe = spool_safe_id("../x/y z");
	TAP_STR_EQ(safe, "___x_y_z", "unsafe id made safe");
	free(safe);
	json_decref(doc);
	free(tmp);
	free(sub);
	{
		char *rm = xasprintf("rm -rf %s", dir);
		if (system(rm)) {}
		free(rm);
	}
	return TAP_DONE();
}
