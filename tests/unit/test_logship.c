/* Unit tests for worker/logship: what a chunk of trainer log is sent as (a progress bar's last
 * drawing per line, "\r\n" as "\n", bytes that are not UTF-8 as '?') and where a chunk may end
 * while the trainer runs (after a '\n', before a redraw's '\r'; a full read with no line end as is). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../worker/logship.h"
#include "tap.h"
#include "util.h"

static void text_n_is(const char *raw, size_t len, const char *want, const char *name)
{
	char *got = logship_text(raw, len);
	TAP_STR_EQ(got, want, name);
	free(got);
}

static void text_is(const char *raw, const char *want, const char *name)
{
	text_n_is(raw, strlen(raw), want, name);
}

/* Writes S to PATH, replacing it. */
static void put(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(s, f);
		fclose(f);
	}
}

/* The chunk from FROM (MAX bytes at most) as "from-to:text", or "none" / "error". */
static char *chunk(const char *path, long long from, size_t max, bool final)
{
	struct logship_chunk c;
	int rc = logship_next(path, from, max, final, &c);
	char *s = rc > 0 ? xasprintf("%lld-%lld:%s", c.from, c.to, c.text) : xstrdup(rc == 0 ? "none" : "error");
	free(c.text);
	return s;
}

static void chunk_is(const char *path, long long from, size_t max, bool final, const char *want, const char *name)
{
	char *got = chunk(path, from, max, final);
	TAP_STR_EQ(got, want, name);
	free(got);
}

int main(void)
{
	char dir[] = "/tmp/rung-test-logship-XXXXXX", *path;
	static const char bad[] = { 'a', (char)0xff, 'b', '\0', 'c', '\n' };

	text_is("plain\nlines\n", "plain\nlines\n", "plain lines are sent as they are");
	text_is("step:  10%|#  | 1/10\rstep:  20%|## | 2/10\rstep:  30%|###| 3/10\n",
		"\rstep:  30%|###| 3/10\n", "a bar redrawn in place: its last drawing, marked by its '\\r'");
	text_is("\rstep:  40%\rstep:  50%", "\rstep:  50%", "a chunk that starts with a redraw keeps its mark");
	text_is("windows line\r\nnext\r\n", "windows line\nnext\n", "\"\\r\\n\" ends a line as \"\\n\" does");
	text_is("Loading\rDone\r\n", "\rDone\n", "an overwritten word and a \"\\r\\n\" end together");
	text_n_is(bad, sizeof bad, "a?b?c\n", "a byte that is not UTF-8 and a NUL become '?'");
	text_is("caf\xc3\xa9 \xe2\x96\x88\n", "caf\xc3\xa9 \xe2\x96\x88\n", "UTF-8 (a bar's block) is kept");
	text_is("", "", "nothing is nothing");

	if (!mkdtemp(dir))
		return 1;
	path = xasprintf("%s/trainer.log", dir);
	chunk_is(path, 0, 64, false, "none", "no log file yet: nothing to send (not an error)");
	put(path, "");
	chunk_is(path, 0, 64, false, "none", "an empty log: nothing");
	put(path, "Loading transformer\nLoad");
	chunk_is(path, 0, 64, false, "0-20:Loading transformer\n", "running: up to the last line end; the half line waits");
	chunk_is(path, 20, 64, false, "none", "from there: only a half line, nothing yet");
	chunk_is(path, 20, 64, true, "20-24:Load", "final: the half line too");
	put(path, "x\n\rbar 1\rbar 2\rbar 3");
	chunk_is(path, 0, 64, false, "0-14:x\n\rbar 2",
		 "running: up to the last redraw, which goes next (it may be drawn over before it ends)");
	chunk_is(path, 14, 64, false, "none", "a lone redraw at the start waits for the next one");
	chunk_is(path, 14, 64, true, "14-20:\rbar 3", "final: the last redraw");
	put(path, "abcdefghij");
	chunk_is(path, 0, 4, false, "0-4:abcd", "a full read with no line end is sent as it is");
	chunk_is(path, 4, 4, false, "4-8:efgh", "and the next from where it ended");
	chunk_is(path, 8, 4, false, "none", "the rest is less than a read and has no line end: it waits");
	chunk_is(path, 10, 4, true, "none", "nothing past the end, even final");
	put(path, "one\r\ntwo\r");
	chunk_is(path, 0, 64, false, "0-8:one\ntwo", "running: a last '\\r' goes next (a redraw, or a \"\\r\\n\" whose '\\n' is to come)");
	chunk_is(path, 8, 64, true, "8-9:", "final: a trailing '\\r' alone is an empty line end");
	put(path, "ab\xe2\x96\x88" "cd");
	chunk_is(path, 0, 4, false, "0-2:ab", "a full read with no line end is not cut through a character (it goes next)");
	chunk_is(path, 2, 4, false, "2-6:\xe2\x96\x88" "c", "and comes whole with the next chunk");
	put(path, "one\ntwo\nthree");
	chunk_is(path, 0, 6, true, "0-4:one\n", "final, a full read: cut at its last line end all the same");
	chunk_is(path, 4, 6, true, "4-8:two\n", "final: the next, too");
	chunk_is(path, 8, 6, true, "8-13:three", "final, a read that reaches the end: all of it");
	free(path);
	path = xasprintf("%s/missing-dir/trainer.log", dir);
	chunk_is(path, 0, 64, false, "none", "a missing folder: nothing");
	free(path);
	path = xasprintf("%s/trainer.log", dir);
	unlink(path);
	free(path);
	rmdir(dir);
	return TAP_DONE();
}
