#define _GNU_SOURCE
/* Hub names in the local Hugging Face cache: see hub.h. The cache's layout
 * is huggingface_hub's (file_download.py): models--ORG--NAME/refs/BRANCH
 * holds the commit, snapshots/COMMIT/ the files (links into blobs/). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/model/builtin_files.h"
#include "runtime/model/hub.h"

#define HUB_PART_MAX 96 /* the hub's longest repository name */

static const char *nonempty(const char *s)
{
	return s && *s ? s : NULL;
}

void rl_hub_env_process(struct rl_hub_env *env)
{
	env->hub_cache = nonempty(getenv("HF_HUB_CACHE"));
	if (!env->hub_cache)
		env->hub_cache = nonempty(getenv("HUGGINGFACE_HUB_CACHE"));
	env->hf_home = getenv("HF_HOME");
	env->xdg_cache_home = getenv("XDG_CACHE_HOME");
	env->home = getenv("HOME");
}

static bool is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* One half of ORG/NAME as the hub allows it: letters, digits, '-', '_',
 * '.', neither "--" nor "..", no '-' or '.' at either end. */
static bool hub_part(const char *s, size_t n)
{
	if (n == 0 || n > HUB_PART_MAX || strchr("-.", s[0]) || strchr("-.", s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		          (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
		if (!ok || (i > 0 && (c == '-' || c == '.') && s[i - 1] == c))
			return false;
	}
	return true;
}

/* A revision (a branch, a tag or a commit) that stays inside the cache. */
static bool safe_revision(const char *r)
{
	if (!*r || *r == '/' || strstr(r, "..") || strlen(r) > 255)
		return false;
	for (; *r; r++)
		if (!((*r >= 'a' && *r <= 'z') || (*r >= 'A' && *r <= 'Z') ||
		      (*r >= '0' && *r <= '9') || strchr("-_./", *r)))
			return false;
	return true;
}

/* The cache directory into buf, and what said so into *from; -1 when no
 * variable gives one. A leading ~/ is HOME, as huggingface_hub expands it. */
static int cache_dir(const struct rl_hub_env *e, char *buf, size_t len, const char **from)
{
	const char *home = nonempty(e->home), *base, *tail;

	if ((base = nonempty(e->hub_cache)))
		*from = "HF_HUB_CACHE", tail = "";
	else if ((base = nonempty(e->hf_home)))
		*from = "HF_HOME/hub", tail = "/hub";
	else if ((base = nonempty(e->xdg_cache_home)))
		*from = "XDG_CACHE_HOME/huggingface/hub", tail = "/huggingface/hub";
	else if ((base = home))
		*from = "~/.cache/huggingface/hub", tail = "/.cache/huggingface/hub";
	else
		return -1;
	int n;
	if (strncmp(base, "~/", 2) == 0 && home)
		n = snprintf(buf, len, "%s%s%s", home, base + 1, tail);
	else
		n = snprintf(buf, len, "%s%s", base, tail);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* refs/REVISION's commit into commit (one line of hex), else REVISION
 * itself when snapshots/REVISION exists (a commit given by hand). */
static int find_commit(const char *repo, const char *rev, char *commit, size_t len)
{
	char path[4096];
	int n = snprintf(path, sizeof path, "%s/refs/%s", repo, rev);
	FILE *f = n > 0 && (size_t)n < sizeof path ? fopen(path, "r") : NULL;

	if (f) {
		size_t got = fread(commit, 1, len - 1, f);
		bool hex = got > 0;

		fclose(f);
		commit[got] = '\0';
		commit[strcspn(commit, " \t\r\n")] = '\0';
		for (const char *c = commit; *c && hex; c++)
			hex = strchr("0123456789abcdefABCDEF", *c) != NULL;
		if (hex && *commit)
			return 0;
	}
	/* no ref, or one that is not a commit: the revision may be one */
	snprintf(commit, len, "%s", rev);
	return -1;
}

char *rl_hub_resolve(const char *name, const char *key, const struct rl_hub_env *env, char *err,
                     size_t errlen)
{
	struct rl_hub_env own;
	char *copy;

	if (!name || !*name) {
		snprintf(err, errlen, "%s: no name given", key);
		return NULL;
	}
	if (!env) {
		rl_hub_env_process(&own);
		env = &own;
	}
	const char *slash = strchr(name, '/'), *at = strrchr(name, '@');
	size_t id_len = at ? (size_t)(at - name) : strlen(name);
	bool hub = slash && (size_t)(slash - name) < id_len &&
	           !memchr(slash + 1, '/', id_len - (size_t)(slash - name) - 1) &&
	           hub_part(name, (size_t)(slash - name)) &&
	           hub_part(slash + 1, id_len - (size_t)(slash - name) - 1) &&
	           (!at || safe_revision(at + 1));

	if (rl_builtin_is(name) || is_dir(name) || !hub) {
		if (!(copy = strdup(name)))
			snprintf(err, errlen, "%s: out of memory", key);
		return copy;
	}
	char cache[4096], repo[4200], commit[256], snap[4500];
	const char *from, *rev = at ? at + 1 : "main";
	int org_len = (int)(slash - name), name_len = (int)(id_len - (size_t)org_len - 1);
	char fetch[512];

	snprintf(fetch, sizeof fetch, "huggingface-cli download %.*s%s%s", (int)id_len, name,
	         at ? " --revision " : "", at ? rev : "");
	if (cache_dir(env, cache, sizeof cache, &from) != 0) {
		snprintf(
		    err, errlen,
		    "%s: %s is no directory, and no Hugging Face cache to look in (HF_HUB_CACHE, "
		    "HF_HOME and HOME are unset); fetch it with `%s` and set HF_HUB_CACHE",
		    key, name, fetch);
		return NULL;
	}
	snprintf(repo, sizeof repo, "%s/models--%.*s--%.*s", cache, org_len, name, name_len,
	         slash + 1);
	int found = find_commit(repo, rev, commit, sizeof commit);
	snprintf(snap, sizeof snap, "%s/snapshots/%s", repo, commit);
	if (!is_dir(snap)) {
		char tried[4600];
		if (found == 0)
			snprintf(tried, sizeof tried, "%s (refs/%s's commit)", snap, rev);
		else
			snprintf(tried, sizeof tried, "%s/refs/%s", repo, rev);
		snprintf(err, errlen,
		         "%s: %s is not a directory, and not in the local Hugging Face cache (%s, "
		         "from %s): no %s; slurm-rl never downloads: fetch it with `%s` (or `hf "
		         "download ...`), where the run's nodes can read it",
		         key, name, cache, from, tried, fetch);
		return NULL;
	}
	if (!(copy = strdup(snap)))
		snprintf(err, errlen, "%s: out of memory", key);
	return copy;
}
