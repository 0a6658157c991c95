/* AI Toolkit config files as rungctl and rungd read them: YAML (through libyaml, resolved the way AI Toolkit's
 * PyYAML SafeLoader plus its exponent-float fix reads them) or JSON, turned into a jansson value.
 * Owns scalar typing, anchors/aliases and merge keys; knows nothing about what the config means. */
#ifndef RUNG_YAMLJSON_H
#define RUNG_YAMLJSON_H

#include <stddef.h>
#include <jansson.h>

/* Parses one YAML document from buf (len bytes; need not be NUL-terminated) into a new jansson value
 * the caller owns. Plain scalars are typed as PyYAML 1.1 does (null/~/empty, true/false/yes/no/on/off,
 * ints incl. 0x/0b/octal/underscores/sexagesimal, floats incl. 1e-4, .inf is refused since JSON has
 * none); quoted and block scalars stay strings. On error returns NULL and sets *err to a heap string
 * that names the line (1-based) and problem; the caller frees it. */
json_t *yamljson_parse(const char *buf, size_t len, char **err);

/* yamljson_parse with a smaller budget for the values produced (aliases counted at full size), for
 * untrusted input such as a request body: past max_nodes the parse fails with an error. */
json_t *yamljson_parse_capped(const char *buf, size_t len, size_t max_nodes, char **err);

/* Resolves one plain (unquoted) scalar the way the parser does; new reference, or NULL with *err
 * set (heap string) for values JSON cannot hold. Exposed for tests. */
json_t *yamljson_scalar(const char *text, char **err);

/* Reads the file at path: `.json` files (or any file whose first non-blank byte is `{`) are parsed as
 * JSON, others as YAML. Returns a new reference or NULL with *err (heap string, names the file). */
json_t *yamljson_load_file(const char *path, char **err);

#endif
