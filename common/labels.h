/* Job labels (migrations/019_job_labels.sql): a flat object of short plain strings that submitters
 * attach to a job ({"team": "vision"}) and filter lists by. The one place their rules and their
 * text form ("team=vision,project=portraits") are written, for rungd, rungctl and the tests. Pure. */
#ifndef RUNG_LABELS_H
#define RUNG_LABELS_H

#include <jansson.h>
#include <stdbool.h>

#define LABELS_MAX 16     /* labels per job */
#define LABELS_KEY_MAX 63 /* bytes of a key: 1..63 of A-Z a-z 0-9 _ . -, starting with a letter or digit */
#define LABELS_VALUE_MAX 63 /* bytes of a value: 0..63 of A-Z a-z 0-9 _ . - */

bool labels_key_ok(const char *key);
bool labels_value_ok(const char *value);

/* Checks a submit's "labels" (borrowed; NULL or null: none). Returns 0, or -1 with *field (the
 * offending path: "labels" or "labels.KEY") and *message, heap strings the caller frees. */
int labels_check(const json_t *labels, char **field, char **message);

/* Parses the text form "k=v,k2=v2" (what=... names it in errors: "labels", "label") into a new
 * object checked as labels_check does; an empty text is {}. NULL with *err (heap) when it is not
 * one: a pair without "=", a bad key or value, a key given twice, more than LABELS_MAX pairs. */
json_t *labels_parse(const char *text, const char *what, char **err);

/* The text form of labels (borrowed), keys sorted: "project=portraits,team=vision", "" when there
 * are none; heap. */
char *labels_format(const json_t *labels);

#endif
