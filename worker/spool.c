/* The finish spool (see spool.h): one JSON file per unacknowledged finish, made durable with the
 * write-temp, fsync, rename, fsync-directory sequence so a crash leaves either the old state or
 * the whole new file, never half of one. */
#include "spool.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

int spool_mkdir_p(const char *path, char **err)
{
	char *p = xstrdup(path);
	int rc = -1;
	for (char *s = p + 1; ; s++) {
		char c = *s;
		if (c != '/' && c != '\0')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			*err = xasprintf("mkdir %s: %s", p, strerror(errno));
			goto out;
		}
		*s = c;
		if (!c)
			break;
	}
	rc = 0;
out:
	free(p);
	return rc;
}

char *spool_safe_id(const char *id)
{
	char *s = xstrdup(id[0] ? id : "_");
	for (char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-')
			*p = '_';
	return s;
}

int spool_put(const char *dir, const char *id, const json_t *doc, char **err)
{
	char *path = xasprintf("%s/%s.json", dir, id), *tmp = xasprintf("%s/.%s.json.tmp", dir, id);
	char *text = json_dumps(doc, JSON_COMPACT);
	int fd = -1, dfd = -1, rc = -1;
	size_t len = text ? strlen(text) : 0, off = 0;

	if (!text) {
		*err = xstrdup("cannot serialise the finish");
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		*err = xasprintf("open %s: %s", tmp, strerror(errno));
		goto out;
	}
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			*err = xasprintf("write %s: %s", tmp, strerror(errno));
			goto out;
		}
		off += (size_t)n;
	}
	if (fsync(fd) < 0 || close(fd) < 0) {
		fd = -1;
		*err = xasprintf("fsync %s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		*err = xasprintf("rename %s: %s", path, strerror(errno));
		goto out;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0) {
		*err = xasprintf("fsync %s: %s", dir, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0) {
		close(fd);
		unlink(tmp);
	}
	if (dfd >= 0)
		close(dfd);
	free(text);
	free(tmp);
	free(path);
	return rc;
}

json_t *spool_get(const char *dir, const char *id)
{
	char *path = xasprintf("%s/%s.json", dir, id);
	json_error_t e;
	json_t *doc = json_load_file(path, 0, &e);
	if (!doc)
		log_warn("unreadable spooled finish", "path=%s error=\"%s\"", path, e.text);
	free(path);
	return doc;
}

void spool_remove(const char *dir, const char *id)
{
	char *path = xasprintf("%s/%s.json", dir, id);
	if (unlink(path) < 0 && errno != ENOENT)
		log_warn("cannot remove spooled finish", "path=%s error=\"%s\"", path, strerror(errno));
	free(path);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char **spool_list(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0, cap = 8;
	char **ids = xcalloc(cap, sizeof *ids);

	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (de->d_name[0] == '.' || l <= 5 || strcmp(de->d_name + l - 5, ".json"))
			continue;
		if (n + 1 >= cap)
			ids = xrealloc(ids, (cap *= 2) * sizeof *ids);
		ids[n] = xstrdup(de->d_name);
		ids[n++][l - 5] = '\0';
	}
	if (d)
		closedir(d);
	ids[n] = NULL;
	qsort(ids, n, sizeof *ids, cmp_str);
	return ids;
}

void spool_list_free(char **ids)
{
	for (size_t i = 0; ids && ids[i]; i++)
		free(ids[i]);
	free(ids);
}
