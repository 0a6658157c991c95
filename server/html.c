/* HTML building blocks for the web pages: the text buffer, escaping, the Markdown subset of the
 * escalation reports, the SVG memory chart and the start-lower story. Everything user-supplied goes
 * through html_esc; nothing here parses HTML or trusts its input. Pure code. */
#include "html.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth_who.h"
#include "http.h"
#include "jobtext.h"
#include "jpath.h"
#include "pool.h"
#include "util.h"

#define MD_MAX_DEPTH 6    /* deepest list nesting rendered as such */
#define MD_MAX_CELLS 64   /* table cells per row beyond this are dropped */
#define CHART_W 600
#define CHART_BAR_X 10
#define CHART_BAR_W 580

void html_addn(struct hbuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		if (b->cap < 256)
			b->cap = 256;
		b->s = xrealloc(b->s, b->cap);
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

void html_add(struct hbuf *b, const char *s)
{
	if (s)
		html_addn(b, s, strlen(s));
}

void html_printf(struct hbuf *b, const char *fmt, ...)
{
	va_list ap;
	char *t = NULL;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&t, fmt, ap);
	va_end(ap);
	if (n < 0)
		abort();
	html_addn(b, t, (size_t)n);
	free(t);
}

static void esc_range(struct hbuf *b, const char *s, size_t n)
{
	size_t i, start = 0;
	const char *rep;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		switch (c) {
		case '&': rep = "&amp;"; break;
		case '<': rep = "&lt;"; break;
		case '>': rep = "&gt;"; break;
		case '"': rep = "&quot;"; break;
		case '\'': rep = "&#39;"; break;
		default: rep = (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f ? "\xef\xbf\xbd" : NULL; break;
		}
		if (!rep)
			continue;
		html_addn(b, s + start, i - start);
		html_add(b, rep);
		start = i + 1;
	}
	html_addn(b, s + start, n - start);
}

void html_esc(struct hbuf *b, const char *s)
{
	if (s)
		esc_range(b, s, strlen(s));
}

void html_url(struct hbuf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		char enc[3] = { '%', hex[c >> 4], hex[c & 15] };
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
		    c == '_' || c == '.' || c == '~')
			html_addn(b, (const char *)&c, 1);
		else
			html_addn(b, enc, 3);
	}
}

void html_href(struct hbuf *b, const char *base, const char *const *keys, const char *const *values, size_t n)
{
	const char *sep = "?";

	html_esc(b, base);
	for (size_t i = 0; i < n; i++) {
		if (!values[i] || !*values[i])
			continue;
		html_add(b, sep);
		html_url(b, keys[i]);
		html_add(b, "=");
		html_url(b, values[i]); /* leaves only [A-Za-z0-9%._~-]: nothing left to escape */
		sep = "&amp;";
	}
}

char *html_take(struct hbuf *b)
{
	char *s = b->s ? b->s : xstrdup("");

	b->s = NULL;
	b->len = b->cap = 0;
	return s;
}

void html_release(struct hbuf *b)
{
	free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
}

/* ---- Markdown subset ---- */

static bool is_punct(char c)
{
	return c && strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", c) != NULL;
}

/* Length of the run of c starting at s. */
static size_t run_of(const char *s, size_t n, char c)
{
	size_t k = 0;

	while (k < n && s[k] == c)
		k++;
	return k;
}

/* Inline spans of s[0..n): `code` (any backtick run, closed by the same run), **bold**, and
 * backslash escapes; the rest escaped text. */
static void md_inline(struct hbuf *b, const char *s, size_t n)
{
	size_t i = 0, start = 0;

	while (i < n) {
		if (s[i] == '\\' && i + 1 < n && is_punct(s[i + 1])) {
			esc_range(b, s + start, i - start);
			esc_range(b, s + i + 1, 1);
			i += 2;
			start = i;
			continue;
		}
		if (s[i] == '`') {
			size_t open = run_of(s + i, n - i, '`'), j;
			for (j = i + open; j < n; j++) {
				size_t r;
				if (s[j] != '`')
					continue;
				r = run_of(s + j, n - j, '`');
				if (r == open)
					break;
				j += r - 1;
			}
			if (j < n) {
				esc_range(b, s + start, i - start);
				html_add(b, "<code>");
				esc_range(b, s + i + open, j - i - open);
				html_add(b, "</code>");
				i = j + open;
				start = i;
				continue;
			}
			i += open;
			continue;
		}
		if (s[i] == '*' && i + 1 < n && s[i + 1] == '*') {
			const char *end = NULL;
			for (size_t j = i + 2; j + 1 < n; j++)
				if (s[j] == '*' && s[j + 1] == '*' && j > i + 2) {
					end = s + j;
					break;
				}
			if (end) {
				esc_range(b, s + start, i - start);
				html_add(b, "<strong>");
				md_inline(b, s + i + 2, (size_t)(end - s) - i - 2);
				html_add(b, "</strong>");
				i = (size_t)(end - s) + 2;
				start = i;
				continue;
			}
		}
		i++;
	}
	esc_range(b, s + start, n - start);
}

/* One line of the document: [s, s+n), without the newline. */
struct md_line {
	const char *s;
	size_t n;
};

static size_t md_indent(const struct md_line *l)
{
	size_t k = 0;

	while (k < l->n && l->s[k] == ' ')
		k++;
	return k;
}

static bool md_blank(const struct md_line *l)
{
	for (size_t k = 0; k < l->n; k++)
		if (l->s[k] != ' ' && l->s[k] != '\t' && l->s[k] != '\r')
			return false;
	return true;
}

/* A fence opener: 3+ backticks after up to 3 spaces; *len gets the run length. */
static bool md_fence(const struct md_line *l, size_t *len)
{
	size_t ind = md_indent(l);

	if (ind > 3)
		return false;
	*len = run_of(l->s + ind, l->n - ind, '`');
	return *len >= 3;
}

/* Heading level 1-6 when the line is `#... text`, else 0. */
static int md_heading(const struct md_line *l)
{
	size_t k = run_of(l->s, l->n, '#');

	return k >= 1 && k <= 6 && (k == l->n || l->s[k] == ' ') ? (int)k : 0;
}

/* A list item `- text` (any indentation): *text gets its start. */
static bool md_item(const struct md_line *l, size_t *text)
{
	size_t ind = md_indent(l);

	if (ind + 1 < l->n && (l->s[ind] == '-' || l->s[ind] == '*') && l->s[ind + 1] == ' ') {
		*text = ind + 2;
		return true;
	}
	if (ind + 1 == l->n && l->s[ind] == '-') {
		*text = ind + 1;
		return true;
	}
	return false;
}

static bool md_table_row(const struct md_line *l)
{
	size_t ind = md_indent(l);

	return ind < l->n && l->s[ind] == '|';
}

static bool md_table_sep(const struct md_line *l)
{
	bool dash = false;

	if (!md_table_row(l))
		return false;
	for (size_t k = 0; k < l->n; k++) {
		char c = l->s[k];
		if (c == '-')
			dash = true;
		else if (c != '|' && c != ':' && c != ' ' && c != '\r')
			return false;
	}
	return dash;
}

/* Renders one table row's cells, split on unescaped pipes, as <th> or <td>. */
static void md_row(struct hbuf *b, const struct md_line *l, const char *tag)
{
	size_t k = md_indent(l) + 1, start = k, cells = 0, end = l->n;

	while (end > k && (l->s[end - 1] == ' ' || l->s[end - 1] == '\r'))
		end--;
	html_add(b, "<tr>");
	for (; k <= end; k++) {
		size_t a, z;
		if (k < end && l->s[k] == '\\' && k + 1 < end) {
			k++;
			continue;
		}
		if (k < end && l->s[k] != '|')
			continue;
		if (k == end && start >= end)
			break;
		for (a = start; a < k && l->s[a] == ' '; a++)
			;
		for (z = k; z > a && l->s[z - 1] == ' '; z--)
			;
		if (cells++ < MD_MAX_CELLS) {
			html_printf(b, "<%s>", tag);
			md_inline(b, l->s + a, z - a);
			html_printf(b, "</%s>", tag);
		}
		start = k + 1;
	}
	html_add(b, "</tr>\n");
}

void html_markdown(struct hbuf *b, const char *md)
{
	struct md_line *lines = NULL;
	size_t nl = 0, cap = 0, i = 0;
	const char *p = md ? md : "";
	int depth = 0;

	for (;;) {
		const char *nlp = strchr(p, '\n');
		size_t n = nlp ? (size_t)(nlp - p) : strlen(p);
		if (!nlp && n == 0)
			break;
		if (nl == cap) {
			cap = cap ? cap * 2 : 64;
			lines = xrealloc(lines, cap * sizeof *lines);
		}
		if (n > 0 && p[n - 1] == '\r')
			lines[nl++] = (struct md_line){ p, n - 1 };
		else
			lines[nl++] = (struct md_line){ p, n };
		if (!nlp)
			break;
		p = nlp + 1;
	}

	while (i < nl) {
		struct md_line *l = &lines[i];
		size_t fence, text;
		int level;

		if (!md_item(l, &text) || md_blank(l)) {
			for (; depth > 0; depth--)
				html_add(b, "</li></ul>\n");
		}
		if (md_blank(l)) {
			i++;
		} else if (md_fence(l, &fence)) {
			html_add(b, "<pre><code>");
			for (i++; i < nl; i++) {
				size_t close, ind = md_indent(&lines[i]);
				if (md_fence(&lines[i], &close) && close >= fence && ind + close == lines[i].n) {
					i++;
					break;
				}
				esc_range(b, lines[i].s, lines[i].n);
				html_add(b, "\n");
			}
			html_add(b, "</code></pre>\n");
		} else if ((level = md_heading(l)) > 0) {
			size_t a = (size_t)level;
			while (a < l->n && l->s[a] == ' ')
				a++;
			html_printf(b, "<h%d>", level);
			md_inline(b, l->s + a, l->n - a);
			html_printf(b, "</h%d>\n", level);
			i++;
		} else if (md_table_row(l) && i + 1 < nl && md_table_sep(&lines[i + 1])) {
			html_add(b, "<table>\n<thead>");
			md_row(b, l, "th");
			html_add(b, "</thead>\n<tbody>\n");
			for (i += 2; i < nl && md_table_row(&lines[i]); i++)
				md_row(b, &lines[i], "td");
			html_add(b, "</tbody>\n</table>\n");
		} else if (md_item(l, &text)) {
			int want = (int)(md_indent(l) / 2) + 1;
			if (want > depth + 1)
				want = depth + 1;
			if (want > MD_MAX_DEPTH)
				want = MD_MAX_DEPTH;
			if (want > depth) {
				html_add(b, "<ul>\n");
				depth++;
			} else {
				for (; depth > want; depth--)
					html_add(b, "</li></ul>\n");
				html_add(b, "</li>\n");
			}
			html_add(b, "<li>");
			md_inline(b, l->s + text, l->n - text);
			i++;
		} else {
			html_add(b, "<p>");
			for (bool first = true; i < nl && !md_blank(&lines[i]); i++, first = false) {
				size_t f;
				if (!first && (md_fence(&lines[i], &f) || md_heading(&lines[i]) || md_item(&lines[i], &f) ||
					       md_table_row(&lines[i])))
					break;
				if (!first)
					html_add(b, "\n");
				md_inline(b, lines[i].s, lines[i].n);
			}
			html_add(b, "</p>\n");
		}
	}
	for (; depth > 0; depth--)
		html_add(b, "</li></ul>\n");
	free(lines);
}

/* ---- SVG memory chart ---- */

static long long mib_at(const json_t *root, const char *path)
{
	const json_t *v = jpath_get(root, path);

	if (json_is_integer(v))
		return json_integer_value(v);
	if (json_is_real(v))
		return (long long)json_real_value(v);
	return -1;
}

static int x_of(long long v, long long scale)
{
	return CHART_BAR_X + (int)((double)v * CHART_BAR_W / (double)scale);
}

int html_mem_chart(struct hbuf *b, const json_t *attempt, long long gpu_total_mib)
{
	const json_t *oom = jpath_get(attempt, "facts.oom");
	long long tried = mib_at(oom, "tried_to_allocate_mib"), alloc = mib_at(oom, "allocated_by_pytorch_mib");
	long long cap = mib_at(oom, "total_capacity_mib"), used = mib_at(attempt, "memory_used_mib");
	long long need, scale;
	bool from_oom = json_is_object(oom) && tried > 0;
	int xcap;

	if (from_oom) {
		if (cap <= 0)
			cap = gpu_total_mib;
		if (alloc < 0)
			alloc = 0;
		need = alloc + tried;
	} else {
		cap = gpu_total_mib;
		need = used;
	}
	if (cap <= 0 || need <= 0)
		return 0;
	scale = (need > cap ? need : cap) * 21 / 20;
	xcap = x_of(cap, scale);
	html_printf(b, "<svg class=\"memchart\" role=\"img\" width=\"%d\" height=\"78\" viewBox=\"0 0 %d 78\" "
		    "xmlns=\"http://www.w3.org/2000/svg\" aria-label=\"", CHART_W, CHART_W);
	if (from_oom)
		html_printf(b, "needed %lld MiB of %lld MiB", need, cap);
	else
		html_printf(b, "last reported %lld MiB used of %lld MiB", need, cap);
	html_add(b, "\">");
	html_printf(b, "<rect x=\"%d\" y=\"22\" width=\"%d\" height=\"26\" fill=\"#eef1f5\"/>", CHART_BAR_X, xcap - CHART_BAR_X);
	if (from_oom) {
		int xa = x_of(alloc, scale), xn = x_of(need, scale);
		html_printf(b, "<rect class=\"alloc\" x=\"%d\" y=\"22\" width=\"%d\" height=\"26\" fill=\"#5b84c4\">"
			    "<title>allocated by PyTorch: %lld MiB</title></rect>", CHART_BAR_X, xa - CHART_BAR_X, alloc);
		html_printf(b, "<rect class=\"tried\" x=\"%d\" y=\"22\" width=\"%d\" height=\"26\" fill=\"%s\">"
			    "<title>tried to allocate: %lld MiB</title></rect>", xa, xn - xa > 1 ? xn - xa : 1,
			    need > cap ? "#d9534f" : "#e8a33d", tried);
		html_printf(b, "<text x=\"%d\" y=\"15\" font-size=\"12\" fill=\"#333\">needed %lld MiB = %lld allocated "
			    "+ %lld tried</text>", CHART_BAR_X, need, alloc, tried);
	} else {
		int xu = x_of(need, scale);
		html_printf(b, "<rect class=\"used\" x=\"%d\" y=\"22\" width=\"%d\" height=\"26\" fill=\"%s\">"
			    "<title>GPU memory used: %lld MiB</title></rect>", CHART_BAR_X, xu - CHART_BAR_X,
			    need > cap ? "#d9534f" : "#5b84c4", need);
		html_printf(b, "<text x=\"%d\" y=\"15\" font-size=\"12\" fill=\"#333\">GPU memory used (last heartbeat): "
			    "%lld MiB</text>", CHART_BAR_X, need);
	}
	html_printf(b, "<line class=\"capacity\" x1=\"%d\" y1=\"18\" x2=\"%d\" y2=\"52\" stroke=\"#222\" "
		    "stroke-width=\"2\" stroke-dasharray=\"4 2\"/>", xcap, xcap);
	html_printf(b, "<text x=\"%d\" y=\"68\" font-size=\"12\" fill=\"#222\" text-anchor=\"%s\">capacity %lld MiB"
		    "</text>", xcap, xcap > CHART_W / 2 ? "end" : "start", cap);
	html_add(b, "</svg>");
	return 1;
}

/* ---- the start-lower story (issue 12) ---- */

static const json_t *started_lower(const json_t *job)
{
	const json_t *sl = jpath_get(job, "recovery_state.started_lower");

	return json_is_object(sl) ? sl : NULL;
}

long long html_start_lower_attempt(const json_t *job)
{
	const json_t *sl = started_lower(job);
	long long n = json_integer_value(json_object_get(sl, "attempt"));

	return sl ? (n > 0 ? n : 1) : 0;
}

void html_esc_json(struct hbuf *b, const json_t *v, const char *null_html)
{
	char *t;

	if (!v || json_is_null(v)) {
		html_add(b, null_html);
		return;
	}
	if (json_is_string(v)) {
		html_esc(b, json_string_value(v));
		return;
	}
	t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	html_esc(b, t);
	free(t);
}

void html_esc_time(struct hbuf *b, const json_t *v, const char *null_html)
{
	const char *s = json_string_value(v);
	char t[20];

	if (!s || strlen(s) < 19) {
		html_esc_json(b, v, null_html);
		return;
	}
	memcpy(t, s, 19);
	t[10] = ' ';
	t[19] = '\0';
	html_esc(b, t);
}

void html_changes_table(struct hbuf *b, const json_t *changes, const char *old_label, const char *new_label,
			const char *null_html)
{
	const json_t *c;
	size_t i;

	html_printf(b, "<table class=\"changes\"><thead><tr><th>path</th><th>%s</th><th>%s</th></tr></thead><tbody>\n",
		    old_label, new_label);
	json_array_foreach(changes, i, c) {
		html_add(b, "<tr><td><code>");
		html_esc_json(b, json_object_get(c, "path"), null_html);
		html_add(b, "</code></td><td>");
		html_esc_json(b, json_object_get(c, "old"), null_html);
		html_add(b, "</td><td>");
		html_esc_json(b, json_object_get(c, "new"), null_html);
		html_add(b, "</td></tr>\n");
	}
	html_add(b, "</tbody></table>\n");
}

/* The story's values: null and absent as "-". */
static void esc_json(struct hbuf *b, const json_t *v)
{
	html_esc_json(b, v, "-");
}

/* "a, b, c" of an array of names, each in <code>; `none` when empty. */
static void esc_names(struct hbuf *b, const json_t *names, const char *none)
{
	const json_t *r;
	size_t i;

	if (json_array_size(names) == 0) {
		html_add(b, none);
		return;
	}
	json_array_foreach(names, i, r) {
		html_add(b, i ? ", <code>" : "<code>");
		esc_json(b, r);
		html_add(b, "</code>");
	}
}

/* A MiB figure of an estimate, or "-" when it has none. */
static void mib_cell(struct hbuf *b, const json_t *est, const char *key)
{
	const json_t *v = json_object_get(est, key);

	html_add(b, "<td>");
	if (json_is_integer(v))
		html_printf(b, "%lld MiB", (long long)json_integer_value(v));
	else
		html_add(b, "-");
	html_add(b, "</td>");
}

/* One row of the estimates table: a memmodel_predict PREDICTION (or none). */
static void estimate_row(struct hbuf *b, const char *label, const json_t *est)
{
	const json_t *fits = json_object_get(est, "fits");

	html_printf(b, "<tr><th>%s</th>", label);
	if (!json_is_object(est)) {
		html_add(b, "<td colspan=\"5\">no estimate recorded</td></tr>\n");
		return;
	}
	mib_cell(b, est, "peak_mib");
	mib_cell(b, est, "margin_mib");
	mib_cell(b, est, "usable_mib");
	html_add(b, json_is_true(fits) ? "<td>predicted to fit</td>"
		    : json_is_false(fits) ? "<td>predicted not to fit</td>" : "<td>unknown</td>");
	html_add(b, "<td>");
	esc_json(b, json_object_get(est, "evidence"));
	html_add(b, "</td></tr>\n");
}

int html_start_lower_line(struct hbuf *b, const json_t *job)
{
	const json_t *sl = started_lower(job);
	long long n = html_start_lower_attempt(job);

	if (!sl)
		return 0;
	html_printf(b, "started below the target (memory model)%s: attempt %lld ran with ",
		    json_integer_value(json_object_get(job, "attempts")) > n ? ", then scaled up" : "", n);
	esc_names(b, json_object_get(sl, "rungs"), "the model's rungs");
	html_add(b, " applied");
	return 1;
}

/* Appends SENTENCE (heap, consumed; NULL: nothing) escaped. 1 when it appended, else 0. */
static int html_esc_sentence(struct hbuf *b, char *sentence)
{
	if (!sentence)
		return 0;
	html_esc(b, sentence);
	free(sentence);
	return 1;
}

int html_start_bigger_line(struct hbuf *b, const json_t *job)
{
	return html_esc_sentence(b, jobtext_started_bigger(job));
}

int html_placement_line(struct hbuf *b, const json_t *job)
{
	return html_esc_sentence(b, jobtext_placement(job));
}

int html_scheduled_line(struct hbuf *b, const json_t *job)
{
	return html_esc_sentence(b, jobtext_scheduled(job));
}

int html_deadline_line(struct hbuf *b, const json_t *job)
{
	return html_esc_sentence(b, jobtext_deadline(job, util_wall_ms()));
}

int html_retried_line(struct hbuf *b, const json_t *job)
{
	return html_esc_sentence(b, jobtext_retried(job));
}

int html_start_lower(struct hbuf *b, const json_t *job)
{
	const json_t *sl = started_lower(job), *changes = json_object_get(sl, "changes");
	const json_t *gpu = json_object_get(sl, "gpu_mib");
	long long n = html_start_lower_attempt(job);

	if (!sl)
		return 0;
	html_printf(b, "<section class=\"card started-lower\" id=\"started-lower\"><h3>Attempt %lld started below the "
		    "target</h3>\n<p class=\"reason\">", n);
	if (json_is_string(json_object_get(sl, "reason")))
		html_esc(b, json_string_value(json_object_get(sl, "reason")));
	else
		html_add(b, "memory model: the target is predicted not to fit this GPU");
	html_add(b, "</p>\n<p>");
	html_start_lower_line(b, job);
	html_add(b, ".</p>\n<h4>The memory model's estimates");
	if (json_is_integer(gpu))
		html_printf(b, " on this %lld MiB GPU", (long long)json_integer_value(gpu));
	html_add(b, "</h4>\n<table class=\"estimates\"><thead><tr><th>config</th><th>estimated peak</th><th>margin</th>"
		    "<th>usable</th><th>verdict</th><th>evidence</th></tr></thead><tbody>\n");
	estimate_row(b, "target", json_object_get(sl, "target_estimate"));
	estimate_row(b, "started with", json_object_get(sl, "estimate"));
	html_add(b, "</tbody></table>\n<p>Rungs applied: ");
	esc_names(b, json_object_get(sl, "rungs"), "none");
	if (json_array_size(json_object_get(sl, "skipped")) > 0) {
		html_add(b, "; skipped (predicted to fail alone): ");
		esc_names(b, json_object_get(sl, "skipped"), "none");
	}
	html_add(b, ".</p>\n<h4>Config changes from the target</h4>\n");
	if (json_array_size(changes) == 0) {
		html_add(b, "<p class=\"muted\">No changes recorded.</p>\n</section>\n");
		return 1;
	}
	html_changes_table(b, changes, "target", "started with", "-");
	html_add(b, "</section>\n");
	return 1;
}

/* ---- the forms of server/web_act.c: which a page shows, by the caller's role ---- */

static bool is_staff(unsigned role)
{
	return (role & (AUTH_SUPPORT | AUTH_ADMIN)) != 0;
}

void html_jobs_filter_form(struct hbuf *b, unsigned role, const char *action, const char *const *states, size_t n,
			   const char *state, const char *owner, const char *kind, const char *label, const char *pool)
{
	static const char *const kinds[] = { "image", "video" };

	html_add(b, "<form method=\"get\" class=\"filter\" action=\"");
	html_esc(b, action);
	html_add(b, "\"><label>state <select name=\"state\"><option value=\"\">all</option>");
	for (size_t i = 0; i < n; i++) {
		html_add(b, "<option value=\"");
		html_esc(b, states[i]);
		html_add(b, state && !strcmp(state, states[i]) ? "\" selected>" : "\">");
		html_esc(b, states[i]);
		html_add(b, "</option>");
	}
	html_add(b, "</select></label>");
	/* a submitter's list is its own whatever it asks (api_jobs_list_filter): no field to fill */
	if (is_staff(role)) {
		html_printf(b, "<label>owner <input type=\"text\" name=\"owner\" maxlength=\"%d\" value=\"", AUTH_NAME_MAX);
		html_esc(b, owner);
		html_add(b, "\" placeholder=\"any token name\"></label>");
	}
	html_add(b, "<label>kind <select name=\"kind\"><option value=\"\">any</option>");
	for (size_t i = 0; i < ARRAY_LEN(kinds); i++)
		html_printf(b, "<option value=\"%s\"%s>%s</option>", kinds[i], kind && !strcmp(kind, kinds[i]) ? " selected" : "",
			    kinds[i]);
	html_add(b, "</select></label><label>labels <input type=\"text\" name=\"label\" maxlength=\"1024\" value=\"");
	html_esc(b, label);
	html_printf(b, "\" placeholder=\"team=vision\"></label><label>pool <input type=\"text\" name=\"pool\" maxlength=\"%d\" "
		    "value=\"", POOL_NAME_MAX);
	html_esc(b, pool);
	html_add(b, "\" placeholder=\"any pool\"></label><button type=\"submit\">Filter</button></form>\n");
}

void html_cancel_matching_form(struct hbuf *b, unsigned role, const char *state, const char *owner, const char *kind,
			       const char *label, const char *pool, int confirm, long long n)
{
	static const char *const states[] = { "queued", "scheduled", "running", "active" };
	static const char *const shown[] = { "not started (queued or scheduled)", "scheduled", "running (told to stop)",
					     "queued, scheduled and running" };
	const char *keys[] = { "owner", "kind", "label", "pool" }, *vals[] = { owner, kind, label, pool };
	bool narrowed = false;
	size_t i;

	for (size_t i = 0; i < ARRAY_LEN(vals); i++)
		narrowed = narrowed || (vals[i] && *vals[i]);
	if (!(role & (AUTH_SUBMITTER | AUTH_ADMIN)) || !narrowed)
		return;
	for (i = 0; state && i < ARRAY_LEN(states) && strcmp(state, states[i]); i++)
		;
	if (!state || i == ARRAY_LEN(states))
		state = "queued";
	html_add(b, "<form method=\"post\" class=\"act cancel-matching\" action=\"/ui/jobs/cancel\">");
	for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
		if (!vals[i] || !*vals[i])
			continue;
		html_printf(b, "<input type=\"hidden\" name=\"%s\" value=\"", keys[i]);
		html_esc(b, vals[i]);
		html_add(b, "\">");
	}
	if (confirm) {
		html_add(b, "<input type=\"hidden\" name=\"state\" value=\"");
		html_esc(b, state);
		html_printf(b, "\"><input type=\"hidden\" name=\"confirm\" value=\"1\"><button type=\"submit\" class=\"danger\">"
			       "Cancel these %lld job%s</button></form>\n", n, n == 1 ? "" : "s");
		return;
	}
	html_add(b, "<label>cancel the <select name=\"state\">");
	for (size_t i = 0; i < ARRAY_LEN(states); i++)
		html_printf(b, "<option value=\"%s\"%s>%s</option>", states[i], !strcmp(state, states[i]) ? " selected" : "",
			    shown[i]);
	html_add(b, "</select> jobs that match</label><button type=\"submit\">Review…</button></form>\n");
}

/* <form method=post action="PATH"> with PATH = prefix + id (escaped as a URL segment). */
static void act_form_open(struct hbuf *b, const char *cls, const char *prefix, const char *id, const char *verb)
{
	html_printf(b, "<form method=\"post\" class=\"act %s\" action=\"", cls);
	html_esc(b, prefix);
	if (id) {
		struct hbuf u = { 0 };
		char *s;
		html_url(&u, id);
		s = html_take(&u);
		html_esc(b, s);
		free(s);
	}
	html_printf(b, "/%s\">", verb);
}

static void note_input(struct hbuf *b, const char *placeholder)
{
	html_printf(b, "<input type=\"text\" name=\"note\" maxlength=\"%d\" placeholder=\"", HTTP_NOTE_MAX);
	html_esc(b, placeholder);
	html_add(b, "\">");
}

void html_job_forms(struct hbuf *b, unsigned role, const json_t *job)
{
	const char *state = json_string_value(json_object_get(job, "state"));
	char id[32];

	if (!state)
		return;
	snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(job, "id")));
	if ((!strcmp(state, "failed") || !strcmp(state, "cancelled")) && (is_staff(role) || role == AUTH_SUBMITTER)) {
		act_form_open(b, "retry", "/ui/jobs/", id, "retry");
		html_add(b, "<select name=\"from\"><option value=\"current\">from the config recovery reached</option>"
			    "<option value=\"target\">from the submitted config</option></select>");
		note_input(b, "why (kept in the event)");
		html_add(b, "<button type=\"submit\">Retry</button></form>\n");
	}
	if (!strcmp(state, "scheduled") && (is_staff(role) || role == AUTH_SUBMITTER)) {
		act_form_open(b, "start", "/ui/jobs/", id, "start");
		html_add(b, "<button type=\"submit\">Start now</button></form>\n");
	}
	/* a requeue (POST /v1/jobs/{id}/requeue): a running job, stopped and queued again unchanged */
	if (!strcmp(state, "running") && !json_is_true(json_object_get(job, "cancel_requested")) &&
	    !json_is_object(json_object_get(job, "stopping")) && (is_staff(role) || role == AUTH_SUBMITTER)) {
		act_form_open(b, "requeue", "/ui/jobs/", id, "requeue");
		note_input(b, "why (kept in the event)");
		html_add(b, "<button type=\"submit\">Requeue (stop, run again unchanged)</button></form>\n");
	}
	if ((!strcmp(state, "queued") || !strcmp(state, "scheduled") || !strcmp(state, "running")) &&
	    !json_is_true(json_object_get(job, "cancel_requested")) && (role & (AUTH_SUBMITTER | AUTH_ADMIN))) {
		act_form_open(b, "cancel", "/ui/jobs/", id, "cancel");
		html_add(b, "<button type=\"submit\">Cancel job</button></form>\n");
	}
	/* a move to another pool (POST /v1/jobs/{id}/pool): every job but a succeeded one */
	if (strcmp(state, "succeeded") && (is_staff(role) || role == AUTH_SUBMITTER)) {
		act_form_open(b, "pool", "/ui/jobs/", id, "pool");
		html_printf(b, "<input type=\"text\" name=\"pool\" maxlength=\"%d\" required placeholder=\"another pool\">",
			    POOL_NAME_MAX);
		html_add(b, "<button type=\"submit\">Move to pool</button></form>\n");
	}
}

void html_escalation_forms(struct hbuf *b, unsigned role, const json_t *esc)
{
	const char *state = json_string_value(json_object_get(esc, "state"));
	char id[32];

	if (!state || !is_staff(role) || !strcmp(state, "resolved"))
		return;
	snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(esc, "id")));
	if (!strcmp(state, "open")) {
		act_form_open(b, "ack", "/ui/escalations/", id, "ack");
		note_input(b, "note: who looks at it");
		html_add(b, "<button type=\"submit\">Acknowledge</button></form>\n");
	}
	act_form_open(b, "resolve", "/ui/escalations/", id, "resolve");
	note_input(b, "note: what was done");
	html_add(b, "<button type=\"submit\">Resolve</button></form>\n");
}

void html_gpu_form(struct hbuf *b, unsigned role, const json_t *gpu)
{
	const char *state = json_string_value(json_object_get(gpu, "state"));
	const char *uuid = json_string_value(json_object_get(gpu, "uuid"));

	if (!state || !uuid || !is_staff(role) || !strcmp(state, "ok"))
		return;
	act_form_open(b, "release", "/ui/gpus/", uuid, "release");
	html_add(b, "<button type=\"submit\">Release</button></form>");
}

void html_owners_table(struct hbuf *b, const json_t *owners)
{
	const json_t *o;
	size_t i;

	html_add(b, "<h2>Owners</h2>\n");
	if (json_array_size(owners) == 0) {
		html_add(b, "<p class=\"muted\">No owner runs or waits for a job.</p>\n");
		return;
	}
	html_add(b, "<table class=\"owners\"><thead><tr><th>owner</th><th>running</th><th>queued</th><th>scheduled</th>"
		    "<th>max running</th><th>per pool</th><th>GPU hours</th></tr></thead><tbody>\n");
	json_array_foreach(owners, i, o) {
		const json_t *l;
		size_t k;
		const char *owner = json_string_value(json_object_get(o, "owner"));
		const char *keys[] = { "owner" }, *vals[] = { owner };
		const json_t *max = json_object_get(o, "max_running");
		json_int_t running = json_integer_value(json_object_get(o, "running"));

		html_add(b, "<tr><td><a href=\"");
		html_href(b, "/ui/jobs", keys, vals, 1);
		html_add(b, "\">");
		html_esc(b, owner ? owner : "?");
		html_printf(b, "</a></td><td>%lld</td><td>%lld</td><td>%lld</td><td class=\"limit\">", (long long)running,
			    (long long)json_integer_value(json_object_get(o, "queued")),
			    (long long)json_integer_value(json_object_get(o, "scheduled")));
		if (!json_is_integer(max))
			html_add(b, "<span class=\"muted\">none</span>");
		else if (json_integer_value(max) == 0)
			html_add(b, "0 (paused)");
		else
			html_printf(b, "%lld%s", (long long)json_integer_value(max),
				    running >= json_integer_value(max) ? " <span class=\"state s-queued\">at its limit</span>" : "");
		html_add(b, "</td><td class=\"pool-limits\">"); /* its limits per pool (migration 034): running/max */
		if (json_array_size(json_object_get(o, "pool_limits")) == 0)
			html_add(b, "<span class=\"muted\">none</span>");
		json_array_foreach(json_object_get(o, "pool_limits"), k, l) {
			json_int_t n = json_integer_value(json_object_get(l, "running"));
			json_int_t m = json_integer_value(json_object_get(l, "max_running"));
			html_add(b, k ? "<br>" : "");
			html_esc(b, json_string_value(json_object_get(l, "pool")) ?: "?");
			html_printf(b, " %lld/%lld%s", (long long)n, (long long)m,
				    n >= m ? " <span class=\"state s-queued\">at its limit</span>" : "");
		}
		html_add(b, "</td><td class=\"quota\">"); /* its GPU-hour quota (migration 035): used/quota in its window */
		if (!json_is_object(json_object_get(o, "quota"))) {
			if (json_array_size(json_object_get(o, "pool_quotas")) == 0)
				html_add(b, "<span class=\"muted\">none</span>");
		} else {
			char *cell = jobtext_quota_cell(json_object_get(o, "quota"));
			html_esc(b, cell);
			if (json_is_true(json_object_get(json_object_get(o, "quota"), "over")))
				html_add(b, " <span class=\"state s-queued\">over its quota</span>");
			free(cell);
		}
		/* its quotas per pool (migration 037), under it: "h200 3.0/2 in 7d" each */
		json_array_foreach(json_object_get(o, "pool_quotas"), k, l) {
			char *cell = jobtext_quota_cell(l);
			if (k || json_is_object(json_object_get(o, "quota")))
				html_add(b, "<br>");
			html_esc(b, json_string_value(json_object_get(l, "pool")) ?: "?");
			html_add(b, " ");
			html_esc(b, cell);
			if (json_is_true(json_object_get(l, "over")))
				html_add(b, " <span class=\"state s-queued\">over its quota there</span>");
			free(cell);
		}
		html_add(b, "</td></tr>\n");
	}
	html_add(b, "</tbody></table>\n");
}

/* A JSON array of pool names as text, "a, b", or a muted dash when empty. */
static void pool_names(struct hbuf *b, const json_t *names)
{
	const json_t *v;
	size_t i;

	if (json_array_size(names) == 0) {
		html_add(b, "<span class=\"muted\">-</span>");
		return;
	}
	json_array_foreach(names, i, v) {
		if (i)
			html_add(b, ", ");
		html_esc(b, json_string_value(v) ?: "?");
	}
}

void html_pools_table(struct hbuf *b, const json_t *pools)
{
	const json_t *p;
	size_t i;
	bool pooled = false;

	json_array_foreach(pools, i, p)
		pooled |= strcmp(json_string_value(json_object_get(p, "pool")) ?: "", "default") != 0 ||
			  json_array_size(json_object_get(p, "borrows")) > 0;
	if (!pooled)
		return; /* a fleet that names no pool: nothing to tell apart */
	html_add(b, "<h2>Pools</h2>\n<table class=\"pools\"><thead><tr><th>pool</th><th>queued</th><th>scheduled</th>"
		    "<th>running</th><th>workers</th><th>GPUs</th><th>drained GPUs</th><th>GPUs lent by borrowers</th>"
		    "<th>borrowed by</th><th>borrows from</th><th>largest GPU (MiB)</th></tr></thead><tbody>\n");
	json_array_foreach(pools, i, p) {
		const char *pool = json_string_value(json_object_get(p, "pool"));
		const char *keys[] = { "pool" }, *vals[] = { pool };

		html_add(b, "<tr><td><a href=\"");
		html_href(b, "/ui/jobs", keys, vals, 1);
		html_add(b, "\">");
		html_esc(b, pool ? pool : "?");
		html_printf(b, "</a></td><td>%lld</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%lld</td>"
			       "<td>%lld</td><td>",
			    (long long)json_integer_value(json_object_get(p, "queued")),
			    (long long)json_integer_value(json_object_get(p, "scheduled")),
			    (long long)json_integer_value(json_object_get(p, "running")),
			    (long long)json_integer_value(json_object_get(p, "workers")),
			    (long long)json_integer_value(json_object_get(p, "gpus")),
			    (long long)json_integer_value(json_object_get(p, "draining_gpus")),
			    (long long)json_integer_value(json_object_get(p, "borrowing_gpus")));
		pool_names(b, json_object_get(p, "borrowed_by"));
		html_add(b, "</td><td>");
		pool_names(b, json_object_get(p, "borrows"));
		html_printf(b, "</td><td>%lld</td></tr>\n", (long long)json_integer_value(json_object_get(p, "max_gpu_mib")));
	}
	html_add(b, "</tbody></table>\n");
}

void html_worker_form(struct hbuf *b, unsigned role, const json_t *worker)
{
	const char *state = json_string_value(json_object_get(worker, "state"));
	char id[32];

	if (!state || !is_staff(role))
		return;
	snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(worker, "id")));
	if (!strcmp(state, "draining")) {
		act_form_open(b, "resume", "/ui/workers/", id, "resume");
		html_add(b, "<button type=\"submit\">Resume</button></form>");
	} else {
		act_form_open(b, "drain", "/ui/workers/", id, "drain");
		note_input(b, "why (maintenance, ...)");
		html_add(b, "<label title=\"stop its running jobs now; they run again elsewhere, unchanged\">"
			    "<input type=\"checkbox\" name=\"requeue\" value=\"on\"> requeue its running jobs</label>");
		html_add(b, "<button type=\"submit\">Drain</button></form>");
	}
}

/* Appends LINE[0..n) without ANSI escape sequences (ESC '[' ... final byte, or ESC and one byte). */
static void add_plain(struct hbuf *b, const char *line, size_t n)
{
	struct hbuf t = { 0 };
	size_t i = 0;

	while (i < n) {
		if (line[i] != '\033') {
			size_t k = i;
			while (k < n && line[k] != '\033')
				k++;
			html_addn(&t, line + i, k - i);
			i = k;
			continue;
		}
		i++;
		if (i < n && line[i] == '[') {
			i++;
			while (i < n && !((unsigned char)line[i] >= 0x40 && (unsigned char)line[i] <= 0x7e))
				i++;
		}
		if (i < n)
			i++;
	}
	html_esc(b, t.s ? t.s : "");
	html_release(&t);
}

int html_log_lines(struct hbuf *b, const char *text, int max_lines)
{
	size_t n = text ? strlen(text) : 0, start = n;
	int lines = 0;

	if (n == 0 || max_lines <= 0)
		return 0;
	/* back from the end to the start of the MAX_LINES-th line (a last line without '\n' counts) */
	for (size_t i = n; i > 0; i--)
		if (text[i - 1] == '\n' && i != n && ++lines == max_lines) {
			start = i;
			break;
		}
	if (lines < max_lines)
		start = 0;
	lines = 0;
	while (start < n) {
		const char *nl = memchr(text + start, '\n', n - start);
		size_t le = nl ? (size_t)(nl - text) : n, ce = le, p = start;
		while (ce > start && text[ce - 1] == '\r')
			ce--;
		for (size_t i = start; i < ce; i++)
			if (text[i] == '\r')
				p = i + 1;
		add_plain(b, text + p, ce - p);
		html_add(b, "\n");
		lines++;
		start = le + 1;
	}
	return lines;
}
